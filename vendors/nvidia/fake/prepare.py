"""One call that sets up a whole fake NVIDIA node: library, node file, host tree, control, settings.

For the end-to-end tests and ``simulate``, which need the NVIDIA backend on a fake node without
knowing how the fake is put together: the result says which backend options and environment make
``create_backend`` use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vendors.nvidia.fake.build import build_fake_nvml
from vendors.nvidia.fake.node import NODE_ENV, Control, write_host_tree, write_node


@dataclass(frozen=True)
class FakeNvidiaNode:
    """A prepared fake node. Put :attr:`env` into ``os.environ`` before the backend initialises NVML."""

    library: Path
    node_file: Path
    host_root: Path
    control: Control

    @property
    def env(self) -> dict[str, str]:
        return {NODE_ENV: str(self.node_file)}

    @property
    def backend_options(self) -> dict[str, str]:
        return {"library": str(self.library)}


def prepare_fake_node(
    directory: Path, description: Mapping[str, object], build_dir: Path | None = None
) -> FakeNvidiaNode:
    """Build (or reuse) the fake library and write ``description`` and its host tree under ``directory``.

    Use it as ``BackendConfig(host_root=fake.host_root, options=fake.backend_options)`` with
    ``fake.env`` in the environment; ``fake.control`` injects Xids, lost GPUs and library failures.
    """
    library = build_fake_nvml(build_dir or directory / "build")
    files = write_node(description, directory)
    host_root = directory / "host"
    write_host_tree(host_root, description)
    return FakeNvidiaNode(
        library=library, node_file=files.node, host_root=host_root, control=Control(files.control)
    )
