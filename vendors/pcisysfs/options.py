"""The options every sysfs backend shares: unknown keys refused, the re-scan interval, the udev mode.

A misspelt ``--backend-option`` must not silently do nothing, and the two settings that drive the
:class:`~vendors.pcisysfs.hotplug.HotplugWatcher` mean the same for every vendor, so they are parsed
(and their errors worded) in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

UDEV_MODES: Mapping[str, bool | None] = MappingProxyType({"auto": None, "on": True, "off": False})
RESCAN_KEYS = frozenset({"rescanSeconds", "udev"})


@dataclass(frozen=True)
class RescanSettings:
    """``rescanSeconds`` (default 5) and ``udev`` (``auto``: only on the real host with udevd)."""

    seconds: float = 5.0
    use_udev: bool | None = None


def reject_unknown(backend: str, options: Mapping[str, str], known: frozenset[str]) -> None:
    """ValueError naming the unknown keys and the known ones."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"unknown {backend} option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def parse_rescan(backend: str, options: Mapping[str, str]) -> RescanSettings:
    """The re-scan interval (a number above 0) and the udev mode; ValueError naming the bad value."""
    text = options.get("rescanSeconds", "5")
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{backend} option rescanSeconds must be a number, not {text!r}") from None
    if not seconds > 0:
        raise ValueError(f"{backend} option rescanSeconds must be above 0, not {text!r}")
    udev = options.get("udev", "auto").strip().lower()
    if udev not in UDEV_MODES:
        raise ValueError(f"{backend} option udev must be one of auto, on, off, not {udev!r}")
    return RescanSettings(seconds, UDEV_MODES[udev])
