"""A fake MLU host for tests, benches and ``simulate``: sysfs, procfs and /dev written under a root.

``write_cambricon_node(root, mlulink_node(8))`` is the one-call setup; :class:`FakeMluNode` then
removes, restores, unbinds and corrupts cards as the kernel would.
"""

from vendors.cambricon.fake.tree import (
    FakeMluNode,
    MluLinkSpec,
    MluSpec,
    NodeSpec,
    information_text,
    mlulink_node,
    pcie_node,
    write_cambricon_node,
)

__all__ = [
    "FakeMluNode",
    "MluLinkSpec",
    "MluSpec",
    "NodeSpec",
    "information_text",
    "mlulink_node",
    "pcie_node",
    "write_cambricon_node",
]
