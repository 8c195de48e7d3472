"""The few host files the backend reads besides NVML: sysfs NUMA node, MIG capability minors, /dev nodes.

All are read at discovery only (never from Allocate), under ``BackendConfig.host_root`` so tests and
``simulate`` can point at a built tree.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hcs_deviceplugin.lazyre import LazyPattern

log = logging.getLogger(__name__)

MIG_MINORS = "proc/driver/nvidia-caps/mig-minors"
CAPS_DIR = "/dev/nvidia-caps"
# The node-wide device nodes NVIDIA's plugin passes when they exist (nvidia.md §3.6).
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")

_MINOR_LINE = LazyPattern(r"^gpu(\d+)/gi(\d+)(?:/ci(\d+))?/access\s+(\d+)$")

MigMinors = dict[tuple[int, int, int | None], int]


def sysfs_numa_node(host_root: Path, pci_address: str) -> tuple[bool, int | None]:
    """``/sys/bus/pci/devices/<addr>/numa_node`` as (file read, node).

    A negative value means "no NUMA information" (a VM, a single-node host): unknown, never node 0,
    and authoritative, so callers must not go on guessing from NVML affinity.
    """
    try:
        value = int((host_root / "sys/bus/pci/devices" / pci_address / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return False, None
    return True, (value if value >= 0 else None)


def parse_mig_minors(text: str) -> MigMinors:
    """``gpu<minor>/gi<g>[/ci<c>]/access <N>`` lines → {(minor, g, c or None): N}; other lines ignored."""
    minors: MigMinors = {}
    for line in text.splitlines():
        match = _MINOR_LINE.match(line.strip())
        if match:
            gpu, gi, ci, minor = match.groups()
            minors[(int(gpu), int(gi), int(ci) if ci is not None else None)] = int(minor)
    return minors


def read_mig_minors(host_root: Path) -> MigMinors:
    try:
        return parse_mig_minors((host_root / MIG_MINORS).read_text())
    except OSError:
        return {}


def cap_path(minors: MigMinors, gpu_minor: int, gi: int, ci: int | None = None) -> str | None:
    """``/dev/nvidia-caps/nvidia-cap<N>`` for a GI (or one of its CIs), None when not listed."""
    minor = minors.get((gpu_minor, gi, ci))
    return None if minor is None else f"{CAPS_DIR}/nvidia-cap{minor}"


def present_control_devices(host_root: Path) -> list[str]:
    """The control device nodes that exist on the host (NVIDIA's plugin skips missing ones)."""
    return [path for path in CONTROL_DEVICES if (host_root / path.lstrip("/")).exists()]
