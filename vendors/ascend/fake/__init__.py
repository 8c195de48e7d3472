"""The fake ``libdcmi.so`` (C, real ABI) and helpers to build it and describe the node it fakes.

``prepare_fake_ascend_node(dir, node_910b())`` is the one-call setup for end-to-end tests and ``simulate``;
README.md beside this file documents the node-file schema, the control file and the vNPU state file.
"""

from vendors.ascend.fake.build import FakeBuildError, build_fake_dcmi
from vendors.ascend.fake.node import (
    NODE_ENV,
    Control,
    NodeFiles,
    Template,
    node_310p_duo,
    node_910_a1,
    node_910b,
    node_a3,
    write_host_tree,
    write_node,
)
from vendors.ascend.fake.prepare import FakeAscendNode, prepare_fake_ascend_node

__all__ = [
    "NODE_ENV",
    "Control",
    "FakeAscendNode",
    "FakeBuildError",
    "NodeFiles",
    "Template",
    "build_fake_dcmi",
    "node_310p_duo",
    "node_910_a1",
    "node_910b",
    "node_a3",
    "prepare_fake_ascend_node",
    "write_host_tree",
    "write_node",
]
