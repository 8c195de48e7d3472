"""Fake Hygon hosts: sysfs and /dev trees in the real layout, for tests, ``simulate`` and the bench."""

from vendors.hygon.fake.tree import (
    DcuSpec,
    FakeHygonNode,
    HygonNodeSpec,
    pcie_node,
    write_hygon_node,
    xgmi_node,
)

__all__ = ["DcuSpec", "FakeHygonNode", "HygonNodeSpec", "pcie_node", "write_hygon_node", "xgmi_node"]
