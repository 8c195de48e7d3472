"""Host-path links from the sysfs device tree: switch, host bridge, then NUMA."""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.model import Link, LinkKind
from vendors.pcisysfs.fake import write_pci_function
from vendors.pcisysfs.pci import PciFunction, read_pci_function
from vendors.pcisysfs.topology import host_path_kind, host_path_links

VENDOR = 0x1D94


def _card(root: Path, address: str, numa: int, bridges: tuple[str, ...]) -> PciFunction:
    write_pci_function(root, address, vendor_id=VENDOR, device_id=0x6210, numa_node=numa, bridges=bridges)
    return read_pci_function(root, address)


def test_switch_host_bridge_and_numa_levels(tmp_path: Path) -> None:
    switch_a = ("0000:60:01.0", "0000:61:00.0")
    a0 = _card(tmp_path, "0000:63:00.0", 0, (*switch_a, "0000:62:00.0"))
    a1 = _card(tmp_path, "0000:64:00.0", 0, (*switch_a, "0000:62:04.0"))
    b0 = _card(tmp_path, "0000:6a:00.0", 0, ("0000:60:03.0", "0000:68:00.0", "0000:69:00.0"))
    c0 = _card(tmp_path, "0000:d3:00.0", 0, ("0000:d0:01.0", "0000:d1:00.0", "0000:d2:00.0"))
    d0 = _card(tmp_path, "0000:e3:00.0", 1, ("0000:e0:01.0", "0000:e1:00.0", "0000:e2:00.0"))
    assert host_path_kind(a0, a1) is LinkKind.PCIE_SWITCH
    assert host_path_kind(a0, b0) is LinkKind.PCIE_HOST_BRIDGE
    assert host_path_kind(a0, c0) is LinkKind.SAME_NUMA
    assert host_path_kind(a0, d0) is LinkKind.CROSS_SOCKET
    links = host_path_links({"A0": a0, "A1": a1, "D0": d0})
    assert links.between("A0", "A1") == (Link(LinkKind.PCIE_SWITCH),)
    assert links.between("A1", "D0") == (Link(LinkKind.CROSS_SOCKET),)


def test_unknown_numa_and_no_tree_gives_no_link(tmp_path: Path) -> None:
    a = PciFunction("0000:01:00.0", VENDOR, 1, device_path="sys/bus/pci/devices/0000:01:00.0")
    b = PciFunction("0000:02:00.0", VENDOR, 1, numa_node=0, device_path="sys/bus/pci/devices/0000:02:00.0")
    assert host_path_kind(a, b) is None
    assert host_path_links({"a": a, "b": b}).links == {}
    assert host_path_kind(b, PciFunction("0000:03:00.0", VENDOR, 1, numa_node=0)) is LinkKind.SAME_NUMA
