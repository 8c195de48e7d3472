"""Node descriptions for the fake libdcmi, a matching host tree, and the run-time control file.

The fake reads plain JSON (schema in ``README.md`` beside this file); these helpers only build that JSON
for the nodes the tests and ``simulate`` need - an 8-chip 910B server, a 910 A1 server with two HCCS rings,
an A3 server with 16 dies, 310P Duo cards - with the numbers ascend.md §2-3 gives, so a test reads as
"an A3 node" rather than as a page of dictionaries.

Where ascend.md has no fact (PCI bus numbers, board ids other than A3's, NUMA layout, exact A1/A3
chip names) the presets carry plausible values, marked so below; no backend decision should depend on
them except through DCMI answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Json = dict[str, Any]

NODE_ENV = "HCS_FAKE_DCMI_NODE"
CONTROL_FILE = "control.json"
STATE_FILE = "state.json"

HUAWEI_PCI_VENDOR = 0x19E5
# PCI device ids of the NPU functions (lspci on Ascend hosts; not in ascend.md, which has no PCI ids).
PCI_910 = 0xD801
PCI_910B = 0xD802
PCI_910_93 = 0xD803
PCI_310P = 0xD500

# dcmi topo_type (ascend.md §2.7)
TOPO_SELF, TOPO_SYS, TOPO_PHB, TOPO_HCCS, TOPO_PXB, TOPO_PIX, TOPO_SIO, TOPO_HCCS_SW = 0, 1, 2, 3, 4, 5, 6, 7

# dcmi_get_device_health values (ascend.md §2.3)
HEALTH_OK, HEALTH_MINOR, HEALTH_MAJOR, HEALTH_CRITICAL = 0, 1, 2, 3

# Board ids that make MindX treat a node as A3 (ascend.md §2.4); the fake's A3 preset uses the first.
A3_BOARD_IDS = (0xB0, 0xB1, 0xB2, 0xB3, 0xB4, 0x81, 0x83, 0xD1, 0xD3)
# Not from ascend.md: placeholders for the other families (MindX does not read them for these chips).
BOARD_910B = 0x24
BOARD_910 = 0x01
BOARD_310P_DUO = 0x66

CARD_DROP_FAULT_CODE = 0x40F84E00  # MindX's synthetic "card dropped" code (ascend.md §2.3)


@dataclass(frozen=True)
class Template:
    """One vNPU template as dcmi_create_vdevice accepts it and VDEV_MNG/GET_VDEV_RESOURCE reports it."""

    name: str
    aicore: int
    aicpu: int
    memory_mb: int
    vpc: float = 0.0
    vdec: float = 0.0
    jpegd: float = 0.0
    jpege: float = 0.0
    venc: float = 0.0
    pngd: float = 0.0

    def to_json(self) -> Json:
        return {
            "name": self.name,
            "aicore": self.aicore,
            "aicpu": self.aicpu,
            "memory_mb": self.memory_mb,
            "vpc": self.vpc,
            "vdec": self.vdec,
            "jpegd": self.jpegd,
            "jpege": self.jpege,
            "venc": self.venc,
            "pngd": self.pngd,
        }


# Templates the driver accepts per family (ascend.md §2.6, dcmi_virtual_intf.c). AI-core and memory numbers
# are HAMi's device-config (the driver splits memory in proportion to AI cores when asked for 0 MB);
# AI CPU counts follow the template names (vir05_1c → 1).
TEMPLATES_310P: tuple[Template, ...] = (
    Template("vir01", 1, 1, 3072, vpc=1, vdec=1, jpegd=1, jpege=1, venc=0),
    Template("vir02", 2, 2, 6144, vpc=2, vdec=2, jpegd=2, jpege=2, venc=1),
    Template("vir02_1c", 2, 1, 6144, vpc=2, vdec=2, jpegd=2, jpege=2, venc=1),
    Template("vir04", 4, 4, 12288, vpc=4, vdec=4, jpegd=4, jpege=4, venc=2),
    Template("vir04_3c", 4, 3, 12288, vpc=4, vdec=4, jpegd=4, jpege=4, venc=2),
    Template("vir04_3c_ndvpp", 4, 3, 12288),
    Template("vir04_4c_dvpp", 4, 4, 12288, vpc=12, vdec=12, jpegd=16, jpege=8, venc=3),
)
TEMPLATES_910_A1: tuple[Template, ...] = (
    Template("vir02", 2, 1, 2184, vpc=1, vdec=1, jpegd=1, jpege=1, pngd=1),
    Template("vir04", 4, 1, 4369, vpc=2, vdec=2, jpegd=2, jpege=2, pngd=2),
    Template("vir08", 8, 3, 8738, vpc=4, vdec=4, jpegd=4, jpege=4, pngd=4),
    Template("vir16", 16, 7, 17476, vpc=8, vdec=8, jpegd=8, jpege=8, pngd=8),
)
# 910B "bin1" (HAMi: 910B3 and 910B4-1); bin0 is the A3 training die's set, bin2 the 32 GB 910B4's.
TEMPLATES_910B_BIN1: tuple[Template, ...] = (
    Template("vir05_1c_16g", 5, 1, 16384, vpc=1, vdec=1, jpegd=2, jpege=1),
    Template("vir10_3c_32g", 10, 3, 32768, vpc=2, vdec=2, jpegd=4, jpege=2),
)
TEMPLATES_910B_BIN0: tuple[Template, ...] = (
    Template("vir06_1c_16g", 6, 1, 16384, vpc=1, vdec=1, jpegd=2, jpege=1),
    Template("vir12_3c_32g", 12, 3, 32768, vpc=2, vdec=2, jpegd=4, jpege=2),
)
TEMPLATES_910B_BIN2: tuple[Template, ...] = (
    Template("vir10_3c_16g", 10, 3, 16384, vpc=2, vdec=2, jpegd=4, jpege=2),
    Template("vir10_4c_16g_m", 10, 4, 16384, vpc=4, vdec=4, jpegd=8, jpege=4, venc=2),
    Template("vir10_3c_16g_nm", 10, 3, 16384),
    Template("vir05_1c_8g", 5, 1, 8192, vpc=1, vdec=1, jpegd=2, jpege=1),
)


def die_id(seed: str, phy_id: int, kind: str = "vdie") -> list[int]:
    """Five stable 32-bit words for a chip's VDIE/NDIE id (MindX prints them as ``%08X-...``)."""
    digest = hashlib.sha256(f"{seed}/{kind}/{phy_id}".encode()).digest()
    return [int.from_bytes(digest[4 * k : 4 * k + 4], "big") for k in range(5)]


def chip(
    seed: str,
    *,
    card_id: int,
    device_id: int,
    phy_id: int,
    logic_id: int | None = None,
    chip_name: str,
    aicore: int,
    aicpu: int,
    bus: int,
    pci_device_id: int,
    numa_node: int,
    board_id: int,
    hbm_mb: int | None = None,
    ddr_mb: int | None = None,
    templates: Sequence[Template] = (),
    ndie: bool = False,
    affinity_cpu: str | None = None,
    network_health: int | None = None,
    chip_ver: str = "V1",
    npu_name: str | None = None,
    product_type: str = "",
) -> Json:
    """One NPU chip (die) as the fake answers for it; ``None`` fields make their calls answer -8255."""
    c: Json = {
        "card_id": card_id,
        "device_id": device_id,
        "logic_id": phy_id if logic_id is None else logic_id,
        "phy_id": phy_id,
        "chip_type": "Ascend",
        "chip_name": chip_name,
        "chip_ver": chip_ver,
        "npu_name": npu_name if npu_name is not None else chip_name,
        "aicore_count": aicore,
        "aicpu_count": aicpu,
        "board_id": f"0x{board_id:x}",
        "pcb_id": 0,
        "bom_id": 0,
        "slot_id": card_id,
        "product_type": product_type,
        "pci": {
            "bdf": f"0000:{bus:02x}:00.0",
            "vendor_id": f"0x{HUAWEI_PCI_VENDOR:04x}",
            "device_id": f"0x{pci_device_id:04x}",
            "subvendor_id": "0x0200",
            "subdevice_id": "0x0100",
        },
        "numa_node": numa_node,
        "die_id": {"vdie": die_id(seed, phy_id, "vdie")},
        "health": HEALTH_OK,
        "error_codes": [],
        "temperature": 40,
        "power": 900,
        "utilization": {"aicore": 0, "aicpu": 0, "ctrlcpu": 2, "npu": 0},
    }
    if ndie:
        c["die_id"]["ndie"] = die_id(seed, phy_id, "ndie")
    if hbm_mb is not None:
        c["hbm"] = {"size_mb": hbm_mb, "usage_mb": 3000, "freq": 1600, "temp": 38, "bandwidth_util": 0}
        c["utilization"].update({"hbm": 4, "hbm_bw": 0})
    if ddr_mb is not None:
        c["memory"] = {
            "size_mb": ddr_mb,
            "available_mb": ddr_mb - 2048,
            "freq": 2133,
            "hugepagesize_kb": 2048,
            "hugepages_total": 0,
            "hugepages_free": 0,
            "utilization": 8,
        }
        c["utilization"].update({"ddr": 8, "ddr_bw": 0})
    if templates:
        c["vnpu"] = {"templates": [t.to_json() for t in templates]}
    if affinity_cpu is not None:
        c["affinity_cpu"] = affinity_cpu
    if network_health is not None:
        c["network_health"] = network_health
    return c


def _matrix(n: int, level: Any) -> list[list[int]]:
    return [[TOPO_SELF if a == b else int(level(a, b)) for b in range(n)] for a in range(n)]


def _base(chips: list[Json], topology: list[list[int]] | None, **extra: Any) -> Json:
    node: Json = {
        "dcmi_version": "24.1.rc3",
        "driver_version": "24.1.rc3",
        "control_file": CONTROL_FILE,
        "state_file": STATE_FILE,
        "vdevice_mode": 0,
        "chips": chips,
        **extra,
    }
    if topology is not None:
        node["topology"] = topology
    return node


# Atlas 800T A2 bus numbers as npu-smi shows them on one such server; NUMA layout illustrative (4 sockets).
_910B_BUSES = (0xC1, 0xC2, 0x81, 0x82, 0x01, 0x02, 0x41, 0x42, 0xC3, 0xC4, 0x83, 0x84, 0x03, 0x04, 0x43, 0x44)
_910B_NUMA = (3, 3, 2, 2, 0, 0, 1, 1, 3, 3, 2, 2, 0, 0, 1, 1)


def node_910b(chips: int = 8, seed: str = "910b") -> Json:
    """Atlas 800T A2: ``chips`` × 910B3 (20 AI cores, 64 GB HBM), one chip per card, card_id = phy_id.

    Topology: a full HCCS mesh per group of 8 (ascend.md §3.3); with 16 chips (the "A+X" x16 box) the two
    groups of 8 see each other over PCIe (SYS).
    """
    if not 1 <= chips <= 16:
        raise ValueError(f"a 910B node has 1..16 chips, not {chips}")
    items = [
        chip(
            seed,
            card_id=i,
            device_id=0,
            phy_id=i,
            chip_name="910B3",
            aicore=20,
            aicpu=7,
            bus=_910B_BUSES[i],
            pci_device_id=PCI_910B,
            numa_node=_910B_NUMA[i],
            board_id=BOARD_910B,
            hbm_mb=65536,
            templates=TEMPLATES_910B_BIN1,
            affinity_cpu=f"{48 * _910B_NUMA[i]}-{48 * _910B_NUMA[i] + 47}",
            network_health=0,
            product_type="Atlas 800T A2",
        )
        for i in range(chips)
    ]
    topology = _matrix(chips, lambda a, b: TOPO_HCCS if a // 8 == b // 8 else TOPO_SYS)
    return _base(items, topology)


def node_910_a1(seed: str = "910a1") -> Json:
    """Atlas 800 9000: 8 × Ascend 910 (A1) as two HCCS rings of 4 (chips 0-3, 4-7), one chip per card.

    The driver answers topology only on 910B / 910_93 (ascend.md §2.7), so this node has no ``topology``
    and the call answers -8255: the rings are a fact of the family the backend must know (§3.3).
    Chip name "910A" as HAMi's config names it (ascend.md §8: unverified).
    """
    buses = (0x3D, 0x3E, 0x3F, 0x40, 0xBD, 0xBE, 0xBF, 0xC0)
    items = [
        chip(
            seed,
            card_id=i,
            device_id=0,
            phy_id=i,
            chip_name="910A",
            aicore=30,
            aicpu=14,
            bus=buses[i],
            pci_device_id=PCI_910,
            numa_node=i // 4,
            board_id=BOARD_910,
            hbm_mb=32768,
            templates=TEMPLATES_910_A1,
            ndie=True,
            network_health=0,
            product_type="Atlas 800 9000",
        )
        for i in range(8)
    ]
    return _base(items, None)


def node_a3(cards: int = 8, superpod: bool = False, seed: str = "a3") -> Json:
    """Atlas 800T A3 (910_93): ``cards`` modules × 2 dies; device_id 0/1 are the dies, 2 is the MCU.

    phy_id = logic_id = 2 × card + die. Topology: SIO between the two dies of a module, HCCS between
    modules (HCCS_SW in a super pod, which also answers CHIP_INF/SPOD_INFO). A3 is told apart from 910B
    only by board_id (0xb0); its chip_name is "Ascend910" as HAMi's config names it (unverified, §8).
    """
    if not 1 <= cards <= 8:
        raise ValueError(f"an A3 node has 1..8 modules, not {cards}")
    items = []
    for card in range(cards):
        for die in range(2):
            phy = 2 * card + die
            numa = card // 2
            c = chip(
                seed,
                card_id=card,
                device_id=die,
                phy_id=phy,
                chip_name="Ascend910",
                npu_name="Ascend910_9392",
                aicore=24,
                aicpu=7,
                bus=0x01 + 0x10 * card + die,
                pci_device_id=PCI_910_93,
                numa_node=numa,
                board_id=A3_BOARD_IDS[0],
                hbm_mb=65536,
                templates=TEMPLATES_910B_BIN0,
                affinity_cpu=f"{40 * numa}-{40 * numa + 39}",
                network_health=0,
                product_type="Atlas 800T A3",
            )
            if superpod:
                c["spod_info"] = {
                    "sdid": phy,
                    "super_pod_size": 384,
                    "super_pod_id": 1,
                    "server_index": 0,
                    "chassis_id": 0,
                    "super_pod_type": 0,
                }
            items.append(c)
    link = TOPO_HCCS_SW if superpod else TOPO_HCCS
    topology = _matrix(len(items), lambda a, b: TOPO_SIO if a // 2 == b // 2 else link)
    return _base(
        items, topology, cards=[{"card_id": card, "mcu_id": 2, "cpu_id": -1} for card in range(cards)]
    )


def node_310p_duo(cards: int = 2, seed: str = "310p") -> Json:
    """Atlas 300I Duo: ``cards`` PCIe cards × 2 × 310P3 (8 AI cores, 24 GB DDR each, no HBM).

    Card ids start at 1 (as slot-numbered cards often do), so card_id ≠ card index ≠ phy_id: a backend
    that confuses them fails here. No topology (the call answers -8255 on 310P), no affinity-cpu call.
    """
    if not 1 <= cards <= 16:
        raise ValueError(f"a 310P Duo node has 1..16 cards, not {cards}")
    items = [
        chip(
            seed,
            card_id=card + 1,
            device_id=dev,
            phy_id=2 * card + dev,
            chip_name="310P3",
            aicore=8,
            aicpu=7,
            bus=0x3B + 0x20 * card + dev,
            pci_device_id=PCI_310P,
            numa_node=card % 2,
            board_id=BOARD_310P_DUO,
            ddr_mb=24576,
            templates=TEMPLATES_310P,
            product_type="Atlas 300I Duo",
        )
        for card in range(cards)
        for dev in range(2)
    ]
    return _base(items, None)


@dataclass(frozen=True)
class NodeFiles:
    """Where a node description, its control file and its vNPU state file were written."""

    node: Path
    control: Path
    state: Path


def _atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so the fake never reads half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_node(description: Mapping[str, Any], directory: Path, name: str = "node.json") -> NodeFiles:
    """Write ``description`` as JSON into ``directory`` with an empty control file.

    The vNPU state file is created empty only if absent: writing the node again (a "restart") keeps the
    vNPUs the fake created before, as a driver keeps them across a plugin restart.
    """
    directory.mkdir(parents=True, exist_ok=True)
    node = dict(description)
    node.setdefault("control_file", CONTROL_FILE)
    node.setdefault("state_file", STATE_FILE)
    path = directory / name
    _atomic_write(path, json.dumps(node, indent=1))
    control = directory / str(node["control_file"])
    _atomic_write(control, "{}\n")
    state = directory / str(node["state_file"])
    if not state.exists():
        _atomic_write(state, '{"vnpus": []}\n')
    return NodeFiles(node=path, control=control, state=state)


def _chips(description: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    chips = description.get("chips", [])
    if not isinstance(chips, list):
        raise ValueError("node description: 'chips' must be a list")
    return chips


def _sysfs_bdf(bdf: str) -> str:
    domain, bus, rest = bdf.split(":")
    device, function = rest.split(".")
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function, 16):x}"


def write_host_tree(host_root: Path, description: Mapping[str, Any]) -> None:
    """Create the host paths an Ascend node has (device nodes as plain files) under ``host_root``.

    ``dev/davinci<phy>`` per chip, ``dev/davinci_manager``, ``dev/devmm_svm``, ``dev/hisi_hdc``;
    ``dev/dvpp_cmdlist`` when a chip is a 310-family part (media engines) or the description says
    ``"dvpp_cmdlist": true``; ``sys/bus/pci/devices/<bdf>/numa_node`` per chip. vNPU nodes
    (``dev/vdavinci<id>``) are made by the fake itself on create when the description has ``host_root``.
    """
    dev = host_root / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):
        (dev / name).touch()
    chips = _chips(description)
    media = description.get("dvpp_cmdlist")
    if media is None:
        media = any(str(c.get("chip_name", "")).startswith("310") for c in chips)
    if media:
        (dev / "dvpp_cmdlist").touch()
    for c in chips:
        (dev / f"davinci{int(c['phy_id'])}").touch()
        pci = c.get("pci")
        if isinstance(pci, Mapping) and "bdf" in pci:
            sysdir = host_root / "sys/bus/pci/devices" / _sysfs_bdf(str(pci["bdf"]))
            sysdir.mkdir(parents=True, exist_ok=True)
            (sysdir / "numa_node").write_text(f"{int(c.get('numa_node', -1))}\n")


class Control:
    """Rewrites the fake's control file (JSON, atomically); the fake applies it on its next call.

    Each method reads the current file, changes one thing and writes it back, so several ``Control``
    objects (or processes) on one file see each other's settings. Values override the node description.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> Json:
        try:
            data = json.loads(self.path.read_text() or "{}")
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict):
            raise ValueError(f"{self.path}: control file must hold a JSON object")
        return data

    def _update(self, change: Any) -> None:
        data = self.read()
        change(data)
        _atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def _chip(self, phy_id: int, key: str, value: Any) -> None:
        def change(data: Json) -> None:
            chip = data.setdefault("chips", {}).setdefault(str(int(phy_id)), {})
            if value is None:
                chip.pop(key, None)
            else:
                chip[key] = value

        self._update(change)

    def _set_member(self, key: str, item: Any, present: bool) -> None:
        def change(data: Json) -> None:
            items = [x for x in data.get(key, []) if x != item]
            if present:
                items.append(item)
            data[key] = items

        self._update(change)

    def set_health(self, phy_id: int, health: int) -> None:
        """dcmi_get_device_health answers ``health`` (0 ok, 1 minor, 2 major, 3 critical, or any value)."""
        self._chip(phy_id, "health", int(health))

    def set_error_codes(self, phy_id: int, codes: Iterable[int]) -> None:
        """dcmi_get_device_errorcode_v2 answers these codes (an empty list clears them)."""
        self._chip(phy_id, "error_codes", [int(c) for c in codes])

    def hang(self, phy_id: int, seconds: float) -> None:
        """Every call for that chip blocks ``seconds`` and then answers normally; 0 ends it.

        Calls already blocked return as soon as the hang is ended (or shortened below their wait).
        """
        self._chip(phy_id, "hang_s", float(seconds) if seconds > 0 else None)

    def drop(self, phy_id: int) -> None:
        """The chip falls off: every call for it answers -8012 (DCMI_ERR_CODE_NOT_REDAY)."""
        self._chip(phy_id, "dropped", True)

    def undrop(self, phy_id: int) -> None:
        self._chip(phy_id, "dropped", None)

    def remove_card(self, card_id: int) -> None:
        """The card is missing from dcmi_get_card_list (as after a reset); calls for it answer -8008."""
        self._set_member("removed_cards", int(card_id), True)

    def restore_card(self, card_id: int) -> None:
        self._set_member("removed_cards", int(card_id), False)

    def not_supported(self, call_name: str) -> None:
        """The named DCMI function answers -8255 (DCMI_ERR_CODE_NOT_SUPPORT) from now on."""
        self._set_member("not_supported", call_name, True)

    def supported(self, call_name: str) -> None:
        self._set_member("not_supported", call_name, False)

    def fail_init(self, code: int) -> None:
        """dcmi_init answers ``code`` (0 makes it succeed again); calls before a good init answer -8005."""

        def change(data: Json) -> None:
            if code:
                data["init_error"] = int(code)
            else:
                data.pop("init_error", None)

        self._update(change)

    def set_vnpu_in_use(self, vdev_id: int, used: bool = True) -> None:
        """The vNPU reports is_container_used = 1, and destroying it answers -8020 (RESOURCE_OCCUPIED)."""
        self._set_member("vnpus_in_use", int(vdev_id), used)

    def clear(self) -> None:
        """Back to the node description: no faults, no hangs."""
        _atomic_write(self.path, "{}\n")
