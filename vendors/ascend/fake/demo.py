"""``simulate --hardware fake``: an Ascend 910 node (two HCCS rings of four) on the fake libdcmi.

Registered in the entry-point group ``hcs_deviceplugin.fake_hardware``. The real backend loads the
fake through ctypes and polls it every 0.2 s; a chip fails when DCMI reports it critical (health 3)
and mends when it reports 0 again.
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.model import Card
from hcs_deviceplugin.simulation.hardware import FakeHardware
from vendors.ascend.fake.node import node_910_a1
from vendors.ascend.fake.prepare import prepare_fake_ascend_node

CRITICAL = 3


def prepare(directory: Path) -> FakeHardware:
    fake = prepare_fake_ascend_node(directory, node_910_a1())

    def set_health(card: Card, health: int) -> None:
        fake.control.set_health(card.index, health)  # Card.index is the chip's phy id

    return FakeHardware(
        backend="ascend",
        host_root=fake.host_root,
        options={**fake.backend_options, "healthIntervalSeconds": "0.2"},
        env=fake.env,
        fail=lambda card: set_health(card, CRITICAL),
        mend=lambda card: set_health(card, 0),
    )
