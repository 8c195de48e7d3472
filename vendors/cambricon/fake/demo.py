"""``simulate --hardware fake``: two MLU370-X8 boards (4 chips) as sysfs and procfs, real backend.

Registered in the entry-point group ``hcs_deviceplugin.fake_hardware``. A card fails when its
driver reports ``CN_BOOTERR`` in ``core_state`` and mends at ``CN_RUNNING``; the backend re-scans
every 0.2 s (udev sees only the real host, not this tree).
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.model import Card
from hcs_deviceplugin.simulation.hardware import FakeHardware
from vendors.cambricon.fake.tree import mlulink_node, write_cambricon_node


def prepare(directory: Path) -> FakeHardware:
    node = write_cambricon_node(directory / "host", mlulink_node(4))
    options = {"rescanSeconds": "0.2", "udev": "off"}
    if node.link_file is not None:
        options["mluLinkFile"] = str(node.link_file)

    def set_state(card: Card, state: str) -> None:
        node.set_core_state(card.pci_address, state)

    return FakeHardware(
        backend="cambricon",
        host_root=node.host_root,
        options=options,
        fail=lambda card: set_state(card, "CN_BOOTERR"),
        mend=lambda card: set_state(card, "CN_RUNNING"),
    )
