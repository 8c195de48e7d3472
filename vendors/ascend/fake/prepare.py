"""One call that sets up a whole fake Ascend node: library, node file, host tree, control, settings.

For the end-to-end tests and ``simulate``, which need the Ascend backend on a fake node without knowing
how the fake is put together: the result says which backend options and environment make the backend
load it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vendors.ascend.fake.build import build_fake_dcmi
from vendors.ascend.fake.node import NODE_ENV, Control, NodeFiles, write_host_tree, write_node


@dataclass(frozen=True)
class FakeAscendNode:
    """A prepared fake node. Put :attr:`env` into ``os.environ`` before the backend calls ``dcmi_init``."""

    lib_path: Path
    host_root: Path
    files: NodeFiles
    control: Control
    env: dict[str, str] = field(default_factory=dict)
    backend_options: dict[str, str] = field(default_factory=dict)


def prepare_fake_ascend_node(
    directory: Path,
    description: Mapping[str, Any],
    build_dir: Path | None = None,
    omit: Iterable[str] = (),
) -> FakeAscendNode:
    """Build (or reuse) the fake library and write ``description`` and its host tree under ``directory``.

    The description written gets ``host_root`` set, so vNPUs the fake creates appear as
    ``<host_root>/dev/vdavinci<id>`` and disappear on destroy, as the driver's device nodes do.
    Use it as ``BackendConfig(host_root=fake.host_root, options=fake.backend_options)`` with ``fake.env``
    in the environment; ``fake.control`` injects health changes, hangs, drops and missing cards.
    """
    lib_path = build_fake_dcmi(build_dir or directory / "build", omit=omit)
    host_root = directory / "host"
    write_host_tree(host_root, description)
    files = write_node({**description, "host_root": str(host_root)}, directory)
    return FakeAscendNode(
        lib_path=lib_path,
        host_root=host_root,
        files=files,
        control=Control(files.control),
        env={NODE_ENV: str(files.node)},
        backend_options={"libraryPath": str(lib_path)},
    )
