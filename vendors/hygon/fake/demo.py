"""``simulate --hardware fake``: four K100_AI DCUs in two xGMI hives, as sysfs and /dev, real backend.

For the entry-point group ``hcs_deviceplugin.fake_hardware``. A card fails by being hot-removed (its
PCI function, DRM devices, /dev nodes and KFD node vanish) and mends when it is put back; the
backend re-scans every 0.2 s (udev sees only the real host, not this tree).
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.model import Card
from hcs_deviceplugin.simulation.hardware import FakeHardware
from vendors.hygon.fake.tree import write_hygon_node, xgmi_node


def prepare(directory: Path) -> FakeHardware:
    node = write_hygon_node(directory / "host", xgmi_node(4, hives=2))

    def fail(card: Card) -> None:
        node.remove_card(card.pci_address)

    def mend(card: Card) -> None:
        node.restore_card(card.pci_address)

    return FakeHardware(
        backend="hygon",
        host_root=node.host_root,
        options={"rescanSeconds": "0.2", "udev": "off"},
        fail=fail,
        mend=mend,
    )


__all__ = ["prepare"]
