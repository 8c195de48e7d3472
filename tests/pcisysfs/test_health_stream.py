"""The re-scan health stream: changes only, each new stale fact announced once, stop ends it."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged
from vendors.pcisysfs.health import health_stream
from vendors.pcisysfs.hotplug import HotplugWatcher

WAIT = 10.0


class Hardware:
    """What a backend's check would read: card health and whether an unknown card showed up."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cards: dict[str, tuple[Health, str]] = {"a": (Health.HEALTHY, ""), "b": (Health.HEALTHY, "")}
        self.new: frozenset[str] = frozenset()
        self.broken = False
        self.failed_checks = 0

    def check(self) -> Mapping[str, tuple[Health, str]]:
        with self.lock:
            if self.broken:
                self.failed_checks += 1
                raise OSError("bus directory unreadable")
            return dict(self.cards)

    def has_new(self) -> frozenset[str]:
        with self.lock:
            return self.new


def _run(hardware: Hardware, stop: threading.Event) -> queue.Queue[HealthEvent | InventoryChanged | None]:
    out: queue.Queue[HealthEvent | InventoryChanged | None] = queue.Queue()
    watcher = HotplugWatcher(Path("/nonexistent-root"), ("pci",), 0.01, stop)
    assert watcher.mode == "rescan" and "is not /" in watcher.fallback_reason

    def pump() -> None:
        for event in health_stream(
            hardware.check, watcher, stop, {"a": Health.HEALTHY, "b": Health.HEALTHY}, hardware.has_new
        ):
            out.put(event)
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return out


def test_only_changes_are_reported_and_a_failed_check_changes_nothing() -> None:
    hardware, stop = Hardware(), threading.Event()
    events = _run(hardware, stop)
    with hardware.lock:
        hardware.broken = True
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        with hardware.lock:
            if hardware.failed_checks >= 2:
                break
        time.sleep(0.005)
    assert hardware.failed_checks >= 2, "the broken check was never called"
    assert events.empty(), "a failed check must not change any card"
    with hardware.lock:
        hardware.broken = False
        hardware.cards["b"] = (Health.UNHEALTHY, "PCI function 0000:63:00.0 removed")
    assert events.get(timeout=WAIT) == HealthEvent("b", Health.UNHEALTHY, "PCI function 0000:63:00.0 removed")
    with hardware.lock:
        hardware.cards["b"] = (Health.HEALTHY, "")
    assert events.get(timeout=WAIT) == HealthEvent("b", Health.HEALTHY, "")
    with hardware.lock:
        hardware.new = frozenset({"new card c"})
    event = events.get(timeout=WAIT)
    assert isinstance(event, InventoryChanged) and event.reason.endswith(": new card c")
    with hardware.lock:
        hardware.cards["a"] = (Health.UNHEALTHY, "driver unbound")
    # The new card is announced once, not on every re-scan: the next event is card a's.
    assert events.get(timeout=WAIT) == HealthEvent("a", Health.UNHEALTHY, "driver unbound")
    stop.set()
    assert events.get(timeout=WAIT) is None


def test_a_new_stale_fact_is_announced_while_an_older_one_stays() -> None:
    """A card seen mid-probe ("new, no minors") and then complete ("minors are ...") is announced twice.

    The rediscovery the first announcement starts can land before the probe ends; then only the
    second fact brings the rediscovery that sees the card's minors. A fact that stays is not repeated.
    """
    hardware, stop = Hardware(), threading.Event()
    events = _run(hardware, stop)
    with hardware.lock:
        hardware.new = frozenset({"new card c (card?/renderD?)"})
    first = events.get(timeout=WAIT)
    assert isinstance(first, InventoryChanged) and first.reason.endswith(": new card c (card?/renderD?)")
    with hardware.lock:
        hardware.new = frozenset({"new card c (card?/renderD?)", "card c minors are card3/renderD130"})
    second = events.get(timeout=WAIT)
    assert isinstance(second, InventoryChanged)
    assert second.reason.endswith(": card c minors are card3/renderD130"), "only the new fact is named"
    with hardware.lock:
        hardware.cards["a"] = (Health.UNHEALTHY, "driver unbound")
    # Both facts stay, unresolved: no rediscovery storm, the next event is card a's.
    assert events.get(timeout=WAIT) == HealthEvent("a", Health.UNHEALTHY, "driver unbound")
    stop.set()
    assert events.get(timeout=WAIT) is None


def test_udev_is_not_used_for_a_test_tree_or_when_disabled(tmp_path: Path) -> None:
    stop = threading.Event()
    assert HotplugWatcher(tmp_path, ("pci",), 1, stop).mode == "rescan"
    disabled = HotplugWatcher(Path("/"), ("pci",), 1, stop, use_udev=False)
    assert (disabled.mode, disabled.fallback_reason) == ("rescan", "udev disabled by configuration")
    stop.set()
    assert disabled.wait() == "stop"


def test_forced_udev_either_opens_a_monitor_or_says_why_not() -> None:
    stop = threading.Event()
    watcher = HotplugWatcher(Path("/"), ("pci", "drm"), 0.05, stop, use_udev=True)
    if watcher.mode == "udev":
        assert watcher.fallback_reason == ""
        woke = watcher.wait()
        assert woke == "interval" or woke.startswith("udev ")
    else:
        assert watcher.fallback_reason.startswith("udev monitor unavailable: ")
    watcher.close()


def test_a_card_going_unhealthy_is_a_warning_and_its_recovery_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vendors.pcisysfs.health")
    hardware, stop = Hardware(), threading.Event()
    events = _run(hardware, stop)
    with hardware.lock:
        hardware.cards["b"] = (Health.UNHEALTHY, "driver unbound")
    assert events.get(timeout=WAIT) == HealthEvent("b", Health.UNHEALTHY, "driver unbound")
    with hardware.lock:
        hardware.cards["b"] = (Health.HEALTHY, "")
    assert events.get(timeout=WAIT) == HealthEvent("b", Health.HEALTHY, "")
    stop.set()
    assert events.get(timeout=WAIT) is None
    about_b = [r for r in caplog.records if getattr(r, "card", None) == "b"]
    assert [(r.levelno, getattr(r, "health", None)) for r in about_b] == [
        (logging.WARNING, "Unhealthy"),
        (logging.INFO, "Healthy"),
    ]
