"""Reading device nodes' type and numbers on the host, for the spec (never on the Allocate path).

The daemon runs in a container with the host's root mounted at ``--host-root``: a node is read at
``<host root>/<host path>``, while the spec names the host path itself, which is what the runtime
opens on the host.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from hcs_deviceplugin.cdi.spec import NodeFacts


def node_facts(host_root: Path, host_path: str) -> NodeFacts | None:
    """``c``/``b`` with major and minor, or None when the path is missing or not a device node."""
    try:
        st = os.stat(host_root / host_path.lstrip("/"))
    except OSError:
        return None
    if stat.S_ISCHR(st.st_mode):
        kind = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        return None
    return NodeFacts(kind, os.major(st.st_rdev), os.minor(st.st_rdev))


def read_facts(host_root: Path, host_paths: Iterable[str]) -> dict[str, NodeFacts]:
    """host path → facts, for the paths that are device nodes under ``host_root``."""
    found: dict[str, NodeFacts] = {}
    for path in dict.fromkeys(host_paths):
        facts = node_facts(host_root, path)
        if facts is not None:
            found[path] = facts
    return found
