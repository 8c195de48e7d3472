"""When to look at the hardware again: udev events where the host has udev, a bounded re-scan always.

udev tells us at once that a PCI function or a DRM/char device came or went, but it is not always
there (no ``udevd`` in minimal hosts, a host root that is a test tree, a netlink socket the container
may not open), and an event can be missed; so the watcher also wakes every ``interval`` seconds and
the backend re-scans sysfs. The backend's check is the same either way, so correctness never depends
on udev; udev only makes the reaction faster.
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

UDEV_CONTROL = Path("/run/udev/control")
"""The socket a running udevd listens on; without udevd, udev-source netlink events never come."""

_STOP_SLICE = 0.25
"""Longest a udev wait blocks before it looks at the stop event again."""


class HotplugWatcher:
    """Wakes a backend's health loop on udev events for ``subsystems`` and every ``interval`` seconds.

    ``use_udev``: None = auto (only when ``host_root`` is ``/`` and udevd runs), True = try even so,
    False = re-scan only. ``mode`` and ``fallback_reason`` say what it ended up doing, for logs and
    the node report.
    """

    def __init__(
        self,
        host_root: Path,
        subsystems: Sequence[str],
        interval: float,
        stop: threading.Event,
        use_udev: bool | None = None,
    ) -> None:
        self.interval = max(interval, 0.001)
        self.stop = stop
        self.subsystems = tuple(subsystems)
        self.fallback_reason = ""
        self._monitor: Any = None
        if use_udev is False:
            self.fallback_reason = "udev disabled by configuration"
        elif use_udev is None and Path(host_root) != Path("/"):
            self.fallback_reason = f"host root {host_root} is not / (udev sees only the real host)"
        elif use_udev is None and not UDEV_CONTROL.exists():
            self.fallback_reason = f"no udevd on this host ({UDEV_CONTROL} missing)"
        else:
            self._monitor = self._open_monitor()
        self.mode = "udev" if self._monitor is not None else "rescan"
        log.info(
            "hotplug watcher for %s: %s%s (re-scan every %.3gs)",
            ",".join(self.subsystems),
            self.mode,
            f" ({self.fallback_reason})" if self.fallback_reason else "",
            self.interval,
        )

    def _open_monitor(self) -> Any:
        try:
            import pyudev

            monitor = pyudev.Monitor.from_netlink(pyudev.Context())
            for subsystem in self.subsystems:
                monitor.filter_by(subsystem)
            monitor.start()
            return monitor
        except Exception as exc:  # pyudev raises OSError, ImportError or its own errors
            self.fallback_reason = f"udev monitor unavailable: {exc}"
            return None

    def wait(self) -> str:
        """Block until a udev event, ``interval`` seconds, or stop; return why, for logs."""
        if self._monitor is None:
            return "stop" if self.stop.wait(self.interval) else "interval"
        remaining = self.interval
        while remaining > 0 and not self.stop.is_set():
            step = min(remaining, _STOP_SLICE)
            readable, _, _ = select.select([self._monitor], [], [], step)
            if readable:
                return self._drain()
            remaining -= step
        return "stop" if self.stop.is_set() else "interval"

    def _drain(self) -> str:
        """Read every queued event (a card's removal comes as several) and describe the first one."""
        first = ""
        while True:
            device = self._monitor.poll(timeout=0)
            if device is None:
                return first or "udev"
            if not first:
                first = f"udev {device.action} {device.subsystem} {device.sys_name}"

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor = None
