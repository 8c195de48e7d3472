"""Real backends on fake hardware for ``simulate --hardware fake``, found through entry points.

The simulated backend shows the core; this mode shows the vendor backends themselves: each vendor
package that ships a fake (a C library with the real ABI, or a sysfs//dev tree) registers a
``prepare(directory)`` function in the entry-point group ``hcs_deviceplugin.fake_hardware``. It sets
up a small node of that vendor under ``directory`` and says how to start the real backend on it
(host root, options, environment) and how to break and mend one card at the hardware level, which
the scenario uses for its failure step. The core never learns which vendors exist.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from hcs_deviceplugin.entrypoints import entry_points
from hcs_deviceplugin.model import Card, Health, HealthEvent

ENTRY_POINT_GROUP = "hcs_deviceplugin.fake_hardware"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FakeHardware:
    """One vendor's fake node, ready for its real backend.

    ``env`` must be in the process environment before the backend loads its library (the fakes read
    their node file from it). ``fail``/``mend`` act on the fake hardware (an Xid, a lost chip, a
    removed PCI function), never on the backend.
    """

    backend: str
    host_root: Path
    options: Mapping[str, str]
    fail: Callable[[Card], None]
    mend: Callable[[Card], None]
    env: Mapping[str, str] = field(default_factory=dict)


Prepare = Callable[[Path], FakeHardware]


@dataclass(frozen=True)
class PreparedHardware:
    """The fakes that could be set up, and why the others could not (e.g. no C compiler)."""

    ready: tuple[FakeHardware, ...]
    skipped: Mapping[str, str]


def prepare_all(directory: Path) -> PreparedHardware:
    """Run every registered ``prepare`` under ``directory/<name>``; one failing fake skips only itself."""
    ready: list[FakeHardware] = []
    skipped: dict[str, str] = {}
    for ep in sorted(entry_points(ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            prepare = cast(Prepare, ep.load())
            hardware = prepare(directory / ep.name)
        except Exception as exc:
            skipped[ep.name] = f"{type(exc).__name__}: {exc}"
            log.warning("fake hardware %s skipped: %s", ep.name, exc)
            continue
        os.environ.update(hardware.env)
        ready.append(hardware)
    return PreparedHardware(tuple(ready), skipped)


class HardwareInjector:
    """The scenario's fault injector for real backends: a card event becomes a fault on its fake."""

    def __init__(self, hardware: Mapping[str, FakeHardware], cards: Callable[[], Mapping[str, Card]]) -> None:
        self._hardware = hardware
        self._cards = cards

    def inject(self, event: HealthEvent) -> None:
        card = self._cards()[event.device_id]
        fake = self._hardware[card.backend]
        if event.health is Health.HEALTHY:
            fake.mend(card)
        else:
            fake.fail(card)
