"""Node descriptions for the fake libnvidia-ml, a matching host tree, and the run-time control file.

The fake reads plain JSON (schema in ``README.md`` beside this file); these helpers only build that
JSON for the nodes tests and ``simulate`` need, with the numbers a real H100 answered (nvidia.md §6),
so a test reads as "an 8-card DGX" rather than as a page of dictionaries.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Json = dict[str, object]

NODE_ENV = "HCS_FAKE_NVML_NODE"
CALL_LOG_ENV = "HCS_FAKE_NVML_CALL_LOG"
"""Names a file the fake appends each NVML call's function name to (see README.md)."""
CONTROL_FILE = "control.jsonl"

H100_SXM_NAME = "NVIDIA H100 80GB HBM3"
H100_SXM_PCI_ID = 0x233010DE
H100_PCIE_NAME = "NVIDIA H100 PCIe"
H100_PCIE_PCI_ID = 0x233110DE
H100_NVL_NAME = "NVIDIA H100 NVL"
H100_NVL_PCI_ID = 0x232110DE
H100_MEMORY = 85_520_809_984
H100_RESERVED = 503_316_480  # what nvmlDeviceGetMemoryInfo_v2 reported reserved on an idle H100

# nvmlGpuTopologyLevel_t
INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM = 0, 10, 20, 30, 40, 50

_UUID_NS = uuid.UUID("3f6d1c2e-8a4b-4c61-9f0e-2b7d5a9c1e00")


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile as nvmlDeviceGetGpuInstanceProfileInfoV answers it."""

    index: int
    id: int
    name: str
    slices: int
    instances: int
    memory_mb: int
    sm: int
    placements: tuple[int, ...]
    placement_size: int
    engines: tuple[int, int, int, int, int] = (1, 1, 0, 1, 0)  # copy, decoder, encoder, jpeg, ofa

    def to_json(self) -> Json:
        ce, dec, enc, jpeg, ofa = self.engines
        return {
            "index": self.index,
            "id": self.id,
            "name": self.name,
            "slices": self.slices,
            "instances": self.instances,
            "memory_mb": self.memory_mb,
            "sm": self.sm,
            "copy_engines": ce,
            "decoders": dec,
            "encoders": enc,
            "jpeg": jpeg,
            "ofa": ofa,
            "placements": list(self.placements),
            "placement_size": self.placement_size,
        }


# What a real H100 80GB HBM3 (driver 580.159.04) answered, by NVML_GPU_INSTANCE_PROFILE_* index; the
# placements are nvidia-smi's (nvidia.md §6).
H100_80GB_PROFILES: tuple[MigProfile, ...] = (
    MigProfile(0, 19, "MIG 1g.10gb", 1, 7, 9984, 16, (0, 1, 2, 3, 4, 5, 6), 1, (1, 1, 0, 1, 0)),
    MigProfile(1, 14, "MIG 2g.20gb", 2, 3, 20096, 32, (0, 2, 4), 2, (2, 2, 0, 2, 0)),
    MigProfile(2, 9, "MIG 3g.40gb", 3, 2, 40448, 60, (0, 4), 4, (3, 3, 0, 3, 0)),
    MigProfile(3, 5, "MIG 4g.40gb", 4, 1, 40448, 64, (0,), 4, (4, 4, 0, 4, 0)),
    MigProfile(4, 0, "MIG 7g.80gb", 7, 1, 81152, 132, (0,), 8, (8, 7, 0, 7, 1)),
    MigProfile(7, 20, "MIG 1g.10gb+me", 1, 1, 9984, 16, (0, 1, 2, 3, 4, 5, 6), 1, (1, 1, 0, 1, 1)),
    MigProfile(9, 15, "MIG 1g.20gb", 1, 4, 20096, 26, (0, 2, 4, 6), 2, (1, 1, 0, 1, 0)),
)


def gpu_uuid(seed: str, index: int) -> str:
    """A stable ``GPU-xxxxxxxx-...`` UUID for card ``index`` of node ``seed``."""
    return f"GPU-{uuid.uuid5(_UUID_NS, f'{seed}/{index}')}"


def mig_instance(
    profile: str, start: int | None = None, profiles: Sequence[MigProfile] = H100_80GB_PROFILES
) -> Json:
    """A GPU instance of ``profile`` (e.g. ``"1g.10gb"``) with one full compute instance."""
    for p in profiles:
        if p.name == f"MIG {profile}":
            inst: Json = {"profile": p.id}
            if start is not None:
                inst["start"] = start
            return inst
    raise ValueError(f"no MIG profile {profile!r} in the table")


def h100_mig(mode: int = 1, instances: Iterable[Json] = ()) -> Json:
    """The ``mig`` block of an H100 80GB: profile table from §6, MIG mode, existing instances."""
    return {
        "mode": mode,
        "pending": mode,
        "max_devices": 7,
        "memory_slices": 8,
        "compute_slices": 7,
        "profiles": [p.to_json() for p in H100_80GB_PROFILES],
        "instances": list(instances),
    }


def gpu(
    seed: str,
    index: int,
    *,
    bus: int,
    name: str = H100_SXM_NAME,
    pci_device_id: int = H100_SXM_PCI_ID,
    numa_node: int = 0,
    nvml_numa: bool = False,
    nvlinks: list[Json] | None = None,
    nvlink_count: int | None = None,
    mig: Json | None = None,
) -> Json:
    """One card. ``nvlinks=None`` makes the NVLink calls answer NOT_SUPPORTED (a PCIe card)."""
    card: Json = {
        "uuid": gpu_uuid(seed, index),
        "name": name,
        "minor": index,
        "bus_id": f"00000000:{bus:02X}:00.0",
        "pci_device_id": f"0x{pci_device_id:08x}",
        "pci_subsystem_id": "0x16c110de",
        "memory_total": H100_MEMORY,
        "memory_reserved": H100_RESERVED,
        "numa_node": numa_node,
        "nvml_numa": nvml_numa,
        "compute_capability": [9, 0],
    }
    if nvlinks is not None:
        card["nvlinks"] = nvlinks
        card["nvlink_count"] = nvlink_count if nvlink_count is not None else len(nvlinks)
    if mig is not None:
        card["mig"] = mig
    return card


DGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
_NVSWITCH_BUSES = (0x05, 0x06, 0x07, 0x08)


def _topology(n: int, level: Callable[[int, int], int]) -> list[list[int]]:
    return [[INTERNAL if a == b else level(a, b) for b in range(n)] for a in range(n)]


def dgx_h100_node(nvlink: str = "switch", seed: str = "dgx") -> Json:
    """8 × H100 SXM, NVLink all-to-all; 4 cards per NUMA node, pairs behind one PCIe switch.

    ``nvlink="switch"``: 18 links per card to four NVSwitches (as on a DGX H100).
    ``nvlink="mesh"``: 2 direct links to each of the 7 peers (14 of 18 links active).
    """
    cards = []
    for i, bus in enumerate(DGX_BUSES):
        links: list[Json]
        if nvlink == "switch":
            links = [
                {"remote": f"00000000:{_NVSWITCH_BUSES[k % 4]:02X}:00.0", "type": "switch"} for k in range(18)
            ]
        elif nvlink == "mesh":
            links = [
                {"remote": f"00000000:{DGX_BUSES[peer]:02X}:00.0", "type": "gpu"}
                for peer in range(8)
                if peer != i
                for _ in range(2)
            ]
        else:
            raise ValueError(f"nvlink must be 'switch' or 'mesh', not {nvlink!r}")
        cards.append(gpu(seed, i, bus=bus, numa_node=i // 4, nvlinks=links, nvlink_count=18, mig=h100_mig(0)))

    def level(a: int, b: int) -> int:
        if a // 2 == b // 2:
            return MULTIPLE
        return NODE if a // 4 == b // 4 else SYSTEM

    return {"gpus": cards, "topology": _topology(8, level), "control_file": CONTROL_FILE}


def pcie_node(count: int = 2, bridged: bool = False, seed: str = "pcie") -> Json:
    """PCIe H100s without NVLink (calls answer NOT_SUPPORTED), or H100 NVL pairs with 12-link bridges."""
    cards = []
    for i in range(count):
        bus = 0x17 + 0x10 * i
        if bridged:
            peer_bus = 0x17 + 0x10 * (i ^ 1)
            links: list[Json] | None = [{"remote": f"00000000:{peer_bus:02X}:00.0", "type": "gpu"}] * 12
            name, pci_id = H100_NVL_NAME, H100_NVL_PCI_ID
        else:
            links, name, pci_id = None, H100_PCIE_NAME, H100_PCIE_PCI_ID
        cards.append(gpu(seed, i, bus=bus, name=name, pci_device_id=pci_id, numa_node=i % 2, nvlinks=links))
    return {
        "gpus": cards,
        "topology": _topology(count, lambda a, b: HOSTBRIDGE if a // 2 == b // 2 else SYSTEM),
        "control_file": CONTROL_FILE,
    }


MIXED_LAYOUT = (("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3))


def mig_node(seed: str = "mig") -> Json:
    """3 × H100 SXM: card 0 MIG with mixed profiles, card 1 MIG with 7 × 1g.10gb, card 2 MIG disabled."""
    mixed = [mig_instance(profile, start) for profile, start in MIXED_LAYOUT]
    single = [mig_instance("1g.10gb") for _ in range(7)]
    cards = [
        gpu(seed, 0, bus=0x18, numa_node=0, mig=h100_mig(1, mixed)),
        gpu(seed, 1, bus=0x2A, numa_node=0, mig=h100_mig(1, single)),
        gpu(seed, 2, bus=0x3A, numa_node=1, mig=h100_mig(0)),
    ]
    return {
        "gpus": cards,
        "topology": _topology(3, lambda a, b: NODE if a < 2 and b < 2 else SYSTEM),
        "control_file": CONTROL_FILE,
    }


@dataclass(frozen=True)
class NodeFiles:
    """Where a node description and its control file were written."""

    node: Path
    control: Path


def write_node(node: Mapping[str, object], directory: Path, name: str = "node.json") -> NodeFiles:
    """Write ``node`` as JSON (and an empty control file) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps(node, indent=1))
    control = directory / str(node.get("control_file", CONTROL_FILE))
    control.touch()
    return NodeFiles(node=path, control=control)


def mig_minor(gpu_minor: int, gi: int, ci: int | None = None) -> int:
    """Minor of ``/dev/nvidia-caps/nvidia-cap<N>``, numbered as the driver numbers them.

    Read from a real H100's ``/proc/driver/nvidia-caps/mig-minors`` (driver 580): config 1, monitor 2,
    then 32 GPUs × 15 GIs × (the GI + 8 CIs): gpu0/gi0 → 3, gpu0/gi0/ci0 → 4, gpu0/gi1 → 12,
    gpu1/gi0 → 138, gpu31/gi14/ci7 → 4322.
    """
    base = 3 + gpu_minor * 15 * 9 + gi * 9
    return base if ci is None else base + 1 + ci


def write_host_tree(root: Path, node: Mapping[str, object], sysfs_numa: bool = False) -> None:
    """Create the host paths the backend reads: /dev nodes (as plain files) and nvidia-caps mig-minors.

    ``sysfs_numa`` also writes ``/sys/bus/pci/devices/<addr>/numa_node`` for every card, which the
    backend prefers over NVML (as NVIDIA's plugin does).
    """
    dev = root / "dev"
    (dev / "nvidia-caps").mkdir(parents=True, exist_ok=True)
    for name in (
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-caps/nvidia-cap1",
        "nvidia-caps/nvidia-cap2",
    ):
        (dev / name).touch()
    cards = node.get("gpus", [])
    assert isinstance(cards, list)
    lines = ["config 1", "monitor 2"]
    for card in cards:
        minor = int(card["minor"])
        (dev / f"nvidia{minor}").touch()
        for gi in range(15):
            lines.append(f"gpu{minor}/gi{gi}/access {mig_minor(minor, gi)}")
            lines.extend(f"gpu{minor}/gi{gi}/ci{ci}/access {mig_minor(minor, gi, ci)}" for ci in range(8))
        if sysfs_numa:
            domain, bus, rest = str(card["bus_id"]).split(":")
            addr = f"{int(domain, 16):04x}:{bus.lower()}:{rest.lower()}"
            sysdir = root / "sys/bus/pci/devices" / addr
            sysdir.mkdir(parents=True, exist_ok=True)
            (sysdir / "numa_node").write_text(f"{card['numa_node']}\n")
    caps = root / "proc/driver/nvidia-caps"
    caps.mkdir(parents=True, exist_ok=True)
    (caps / "mig-minors").write_text("\n".join(lines) + "\n")


class Control:
    """Appends commands to the fake's control file; the fake applies them on its next call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _send(self, command: Json) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(command) + "\n")

    def xid(self, gpu: int | str, xid: int, gi: int | None = None, ci: int | None = None) -> None:
        """An Xid on card index or UUID (a MIG UUID attributes it to that MIG device)."""
        command: Json = {"op": "xid", "gpu": gpu, "xid": xid}
        if gi is not None:
            command["gi"] = gi
        if ci is not None:
            command["ci"] = ci
        self._send(command)

    def event(self, gpu: int | str, event_type: int, data: int = 0) -> None:
        """Any other event type bit, e.g. 0x2 for a double-bit ECC error."""
        self._send({"op": "event", "gpu": gpu, "type": event_type, "data": data})

    def lost(self, gpu: int | str) -> None:
        """The card falls off the bus: its calls answer GPU_IS_LOST and event waits report it."""
        self._send({"op": "lost", "gpu": gpu})

    def restore(self, gpu: int | str) -> None:
        """The card answers again."""
        self._send({"op": "restore", "gpu": gpu})

    def fail(self, code: int = 999) -> None:
        """Every call (nvmlInit included) answers ``code`` until :meth:`heal`."""
        self._send({"op": "fail", "code": code})

    def heal(self) -> None:
        self._send({"op": "fail", "code": 0})
