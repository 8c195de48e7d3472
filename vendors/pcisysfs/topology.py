"""Host-path links between cards from where their PCI functions sit in the sysfs device tree.

``/sys/devices/pci<domain>:<bus>/<root port>/<switch up>/<switch down>/<function>`` spells out the
PCIe path, so two functions that share an ancestor below the root port sit behind one switch (peer
traffic stays in the switch), two under the same ``pci<domain>:<bus>`` share a host bridge, and
beyond that only the NUMA nodes say whether traffic crosses sockets. This is what ``nvidia-smi topo``
calls PIX/PXB, PHB, NODE and SYS, read without any vendor library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from hcs_deviceplugin.model import Link, LinkKind, LinkMatrix
from vendors.pcisysfs.pci import PciFunction

_DEVICES_PREFIX = ("sys", "devices")


def _tree_path(function: PciFunction) -> Sequence[str] | None:
    """The function's ancestors, root complex first, or None when sysfs gave no real device path."""
    parts = function.device_path.split("/")
    if tuple(parts[:2]) != _DEVICES_PREFIX or len(parts) < 4 or not parts[2].startswith("pci"):
        return None
    return parts[2:-1]


def host_path_kind(a: PciFunction, b: PciFunction) -> LinkKind | None:
    """The closest host-path relation of two functions, or None when nothing is known."""
    path_a, path_b = _tree_path(a), _tree_path(b)
    if path_a is not None and path_b is not None and path_a[0] == path_b[0]:
        shared = 0
        for x, y in zip(path_a, path_b, strict=False):
            if x != y:
                break
            shared += 1
        # root complex + root port + at least the switch's upstream port in common
        return LinkKind.PCIE_SWITCH if shared >= 3 else LinkKind.PCIE_HOST_BRIDGE
    if a.numa_node is None or b.numa_node is None:
        return None
    return LinkKind.SAME_NUMA if a.numa_node == b.numa_node else LinkKind.CROSS_SOCKET


def host_path_links(functions: Mapping[str, PciFunction]) -> LinkMatrix:
    """One host-path link per pair of cards (card id → its PCI function); pairs with no facts are left out."""
    pairs = []
    for (id_a, fn_a), (id_b, fn_b) in combinations(sorted(functions.items()), 2):
        kind = host_path_kind(fn_a, fn_b)
        if kind is not None:
            pairs.append((id_a, id_b, Link(kind)))
    return LinkMatrix.from_pairs(pairs)
