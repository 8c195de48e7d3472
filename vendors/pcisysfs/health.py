"""Turns a backend's "how is every card now" check into a stream of changes for the core.

sysfs has no health events to subscribe to: health is whatever the files say when we look. So a
backend gives one function answering for all its cards, and this loop calls it whenever the
:class:`~vendors.pcisysfs.hotplug.HotplugWatcher` wakes, and yields only what changed. A check that
fails outright (a bug, an unreadable bus directory) changes nothing and is logged; the stream goes on,
because marking every card Unhealthy on one bad read would empty the node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping

from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged
from vendors.pcisysfs.hotplug import HotplugWatcher

log = logging.getLogger(__name__)

CardCheck = Callable[[], Mapping[str, tuple[Health, str]]]
"""Card id → (health, reason) as the hardware looks now."""


def health_stream(
    check: CardCheck,
    watcher: HotplugWatcher,
    stop: threading.Event,
    initial: Mapping[str, Health],
    new_cards: Callable[[], bool] | None = None,
) -> Iterator[HealthEvent | InventoryChanged]:
    """Yield a HealthEvent per card whose health changed, and InventoryChanged once per new card burst."""
    known = dict(initial)
    announced_new = False
    while not stop.is_set():
        reason = watcher.wait()
        if stop.is_set():
            break
        try:
            now = check()
        except Exception:
            log.exception("health check failed after %s; keeping the last known health", reason)
            continue
        for card_id, (health, why) in sorted(now.items()):
            if known.get(card_id) != health:
                known[card_id] = health
                log.log(
                    logging.WARNING if health is Health.UNHEALTHY else logging.INFO,
                    "card %s %s: %s (woken by %s)",
                    card_id,
                    health,
                    why or "ok",
                    reason,
                    extra={"card": card_id, "health": str(health), "reason": why or "ok"},
                )
                yield HealthEvent(card_id, health, why)
        if new_cards is None:
            continue
        try:
            appeared = new_cards()
        except Exception:
            log.exception("looking for new cards failed after %s", reason)
            continue
        if appeared and not announced_new:
            yield InventoryChanged(f"new device found ({reason})")
        announced_new = appeared
    watcher.close()
