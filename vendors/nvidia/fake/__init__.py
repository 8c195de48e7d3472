"""The fake ``libnvidia-ml.so.1`` (C, real ABI) and helpers to build it and describe the node it fakes.

``prepare_fake_node(dir, dgx_h100_node())`` is the one-call setup for end-to-end tests and ``simulate``;
README.md beside this file documents the node-file schema and the control commands.
"""

from vendors.nvidia.fake.build import FakeBuildError, build_fake_nvml
from vendors.nvidia.fake.node import (
    CALL_LOG_ENV,
    NODE_ENV,
    Control,
    NodeFiles,
    dgx_h100_node,
    mig_node,
    pcie_node,
    write_host_tree,
    write_node,
)
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

__all__ = [
    "CALL_LOG_ENV",
    "NODE_ENV",
    "Control",
    "FakeBuildError",
    "FakeNvidiaNode",
    "NodeFiles",
    "build_fake_nvml",
    "dgx_h100_node",
    "mig_node",
    "pcie_node",
    "prepare_fake_node",
    "write_host_tree",
    "write_node",
]
