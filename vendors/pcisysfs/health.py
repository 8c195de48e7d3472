"""Turns a backend's "how is every card now" check into a stream of changes for the core.

sysfs has no health events to subscribe to: health is whatever the files say when we look. So a
backend gives one function answering for all its cards, and this loop calls it whenever the
:class:`~vendors.pcisysfs.hotplug.HotplugWatcher` wakes, and yields only what changed. A check that
fails outright (a bug, an unreadable bus directory) changes nothing and is logged; the stream goes on,
because marking every card Unhealthy on one bad read would empty the node.

What only a new discovery can take in (a card no discovery has seen, a card whose DRM minors or
device node changed) comes from a second function as a set of facts, one line each. The stream
announces :class:`~hcs_deviceplugin.model.InventoryChanged` when a fact appears that the previous look
did not have, not merely when the set turns non-empty: a card hot-added while its driver is still
binding is first "new, no minors yet", and if the rediscovery that announcement starts lands before
the binding ends, the card is known with no minors and only a later fact ("its minors are now ...")
can bring the rediscovery that makes it Healthy. A fact that stays (one discovery cannot resolve)
is announced once, so a stuck card cannot make a rediscovery storm.
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

StaleFacts = Callable[[], frozenset[str]]
"""What differs from the last discovery now, one line per fact (empty: discovery is current)."""


def health_stream(
    check: CardCheck,
    watcher: HotplugWatcher,
    stop: threading.Event,
    initial: Mapping[str, Health],
    new_cards: StaleFacts | None = None,
) -> Iterator[HealthEvent | InventoryChanged]:
    """Yield a HealthEvent per card whose health changed, and InventoryChanged when a stale fact is new."""
    known = dict(initial)
    seen_stale: frozenset[str] = frozenset()
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
            stale = new_cards()
        except Exception:
            log.exception("looking for new cards failed after %s", reason)
            continue
        fresh = sorted(stale - seen_stale)
        seen_stale = stale
        if fresh:
            yield InventoryChanged(f"hardware differs from the last discovery ({reason}): {'; '.join(fresh)}")
    watcher.close()
