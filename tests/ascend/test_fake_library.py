"""The fake libdcmi answers plain ctypes the way ascend.md §2 says the real library does.

These tests call the library directly, with ctypes structures written here from the design file (not
imported from the backend), so a fake that drifted from the real ABI is caught here rather than hidden
behind backend code written against the same misunderstanding.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vendors.ascend.fake import (
    FakeAscendNode,
    FakeBuildError,
    build_fake_dcmi,
    node_310p_duo,
    node_910_a1,
    node_910b,
    node_a3,
)
from vendors.ascend.fake.node import NODE_ENV, write_node

Prepare = Callable[..., FakeAscendNode]

OK = 0
INVALID_PARAMETER = -8001
INNER_ERR = -8005
INVALID_DEVICE_ID = -8007
DEVICE_NOT_EXIST = -8008
NOT_READY = -8012
RESOURCE_OCCUPIED = -8020
NOT_SUPPORT = -8255
AUTO = 0xFFFFFFFF
VDEV_MNG, GET_VDEV_RESOURCE, GET_TOTAL_RESOURCE, GET_FREE_RESOURCE = 52, 0, 1, 2
NDIE, VDIE = 0, 1
SELF, SYS, HCCS, SIO, HCCS_SW = 0, 1, 3, 6, 7

# ascend.md §6: the symbols the fake must export at least.
MINIMUM_SYMBOLS = {
    "dcmi_init",
    "dcmi_get_card_list",
    "dcmi_get_card_num_list",
    "dcmi_get_device_num_in_card",
    "dcmi_get_device_logic_id",
    "dcmi_get_device_phyid_from_logicid",
    "dcmi_get_device_logicid_from_phyid",
    "dcmi_get_card_id_device_id_from_logicid",
    "dcmi_get_device_type",
    "dcmi_get_device_health",
    "dcmi_get_device_errorcode_v2",
    "dcmi_get_device_chip_info",
    "dcmi_get_device_board_info",
    "dcmi_get_device_memory_info_v3",
    "dcmi_get_device_hbm_info",
    "dcmi_get_device_pcie_info_v2",
    "dcmi_get_device_die_v2",
    "dcmi_get_topo_info_by_device_id",
    "dcmi_create_vdevice",
    "dcmi_set_destroy_vdevice",
    "dcmi_get_device_info",
    "dcmi_get_dcmi_version",
    "dcmi_get_driver_version",
}


# ---- structures, written from ascend.md §2.4-2.8 ------------------------------------------------------


class ChipInfo(ctypes.Structure):
    _fields_ = [
        ("chip_type", ctypes.c_char * 32),
        ("chip_name", ctypes.c_char * 32),
        ("chip_ver", ctypes.c_char * 32),
        ("aicore_cnt", ctypes.c_uint),
    ]


class ChipInfoV2(ctypes.Structure):
    _fields_ = [*ChipInfo._fields_, ("npu_name", ctypes.c_char * 32)]


class PcieInfoAll(ctypes.Structure):
    _fields_ = [
        ("venderid", ctypes.c_uint),
        ("subvenderid", ctypes.c_uint),
        ("deviceid", ctypes.c_uint),
        ("subdeviceid", ctypes.c_uint),
        ("domain", ctypes.c_int),
        ("bdf_busid", ctypes.c_uint),
        ("bdf_deviceid", ctypes.c_uint),
        ("bdf_funcid", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 32),
    ]


class PcieInfo(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint)
        for name in (
            "deviceid",
            "venderid",
            "subvenderid",
            "subdeviceid",
            "bdf_deviceid",
            "bdf_busid",
            "bdf_funcid",
        )
    ]


class BoardInfo(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint) for name in ("board_id", "pcb_id", "bom_id", "slot_id")]


class DieId(ctypes.Structure):
    _fields_ = [("soc_die", ctypes.c_uint * 5)]


class HbmInfo(ctypes.Structure):
    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("memory_usage", ctypes.c_ulonglong),
        ("temp", ctypes.c_int),
        ("bandwith_util_rate", ctypes.c_uint),
    ]


class MemoryInfoV3(ctypes.Structure):
    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("memory_available", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("hugepagesize", ctypes.c_ulong),
        ("hugepages_total", ctypes.c_ulong),
        ("hugepages_free", ctypes.c_ulong),
        ("utiliza", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 60),
    ]


class SpodInfo(ctypes.Structure):
    _fields_ = [
        *[
            (n, ctypes.c_uint)
            for n in (
                "sdid",
                "super_pod_size",
                "super_pod_id",
                "server_index",
                "chassis_id",
                "super_pod_type",
            )
        ],
        ("reserve", ctypes.c_uint * 6),
    ]


class BaseResource(ctypes.Structure):
    _fields_ = [
        ("token", ctypes.c_ulonglong),
        ("token_max", ctypes.c_ulonglong),
        ("task_timeout", ctypes.c_ulonglong),
        ("vfg_id", ctypes.c_uint),
        ("vip_mode", ctypes.c_ubyte),
        ("reserved", ctypes.c_ubyte * 31),
    ]


class ComputingResource(ctypes.Structure):
    _fields_ = [
        ("aic", ctypes.c_float),
        ("aiv", ctypes.c_float),
        *[
            (n, ctypes.c_ushort)
            for n in ("dsa", "rtsq", "acsq", "cdqm", "c_core", "ffts", "sdma", "pcie_dma")
        ],
        ("memory_size", ctypes.c_ulonglong),
        *[(n, ctypes.c_uint) for n in ("event_id", "notify_id", "stream_id", "model_id")],
        *[
            (n, ctypes.c_ushort)
            for n in (
                "topic_schedule_aicpu",
                "host_ctrl_cpu",
                "host_aicpu",
                "device_aicpu",
                "topic_ctrl_cpu_slot",
            )
        ],
        ("vdev_aicore_utilization", ctypes.c_uint),
        ("vdev_memory_total", ctypes.c_ulonglong),
        ("vdev_memory_free", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ubyte * 12),
    ]


class MediaResource(ctypes.Structure):
    _fields_ = [
        *[(n, ctypes.c_float) for n in ("jpegd", "jpege", "vpc", "vdec", "pngd", "venc")],
        ("reserved", ctypes.c_ubyte * 32),
    ]


class CreateVdevRes(ctypes.Structure):
    _fields_ = [
        ("vdev_id", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("template_name", ctypes.c_char * 32),
        ("reserved", ctypes.c_ubyte * 64),
    ]


class CreateVdevOut(ctypes.Structure):
    _fields_ = [
        *[(n, ctypes.c_uint) for n in ("vdev_id", "pcie_bus", "pcie_device", "pcie_func", "vfg_id")],
        ("reserved", ctypes.c_ubyte * 32),
    ]


class VdevQueryInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 16),
        ("status", ctypes.c_uint),
        ("is_container_used", ctypes.c_uint),
        ("vfid", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("container_id", ctypes.c_ulonglong),
        ("base", BaseResource),
        ("computing", ComputingResource),
        ("media", MediaResource),
    ]


class VdevQuery(ctypes.Structure):
    _fields_ = [("vdev_id", ctypes.c_uint), ("query_info", VdevQueryInfo)]


class SocTotalResource(ctypes.Structure):
    _fields_ = [
        ("vdev_num", ctypes.c_uint),
        ("vdev_id", ctypes.c_uint * 32),
        ("vfg_num", ctypes.c_uint),
        ("vfg_bitmap", ctypes.c_uint),
        ("base", BaseResource),
        ("computing", ComputingResource),
        ("media", MediaResource),
    ]


class SocFreeResource(ctypes.Structure):
    _fields_ = [
        ("vfg_num", ctypes.c_uint),
        ("vfg_bitmap", ctypes.c_uint),
        ("base", BaseResource),
        ("computing", ComputingResource),
        ("media", MediaResource),
    ]


class EventFilter(ctypes.Structure):
    _fields_ = [
        ("filter_flag", ctypes.c_ulonglong),
        ("event_id", ctypes.c_uint),
        ("severity", ctypes.c_ubyte),
        ("node_type", ctypes.c_ubyte),
        ("resv", ctypes.c_ubyte * 32),
    ]


class DmsFaultEvent(ctypes.Structure):
    _fields_ = [
        ("event_id", ctypes.c_uint),
        ("deviceid", ctypes.c_ushort),
        *[
            (n, ctypes.c_ubyte)
            for n in ("node_type", "node_id", "sub_node_type", "sub_node_id", "severity", "assertion")
        ],
        ("event_serial_num", ctypes.c_int),
        ("notify_serial_num", ctypes.c_int),
        ("alarm_raised_time", ctypes.c_ulonglong),
        ("event_name", ctypes.c_char * 256),
        ("additional_info", ctypes.c_char * 32),
        ("reserved", ctypes.c_ubyte * 32),
    ]


class Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("dms_event", DmsFaultEvent)]


# ---- a thin ctypes caller -------------------------------------------------------------------------------


class Dcmi:
    """Plain ctypes calls on the fake; every method returns (rc, value) so tests assert both."""

    def __init__(self, lib: Path) -> None:
        self.lib = ctypes.CDLL(str(lib))

    def init(self) -> int:
        return int(self.lib.dcmi_init())

    def cards(self) -> tuple[int, list[int]]:
        num, ids = ctypes.c_int(), (ctypes.c_int * 64)()
        rc = self.lib.dcmi_get_card_list(ctypes.byref(num), ids, 64)
        return rc, list(ids[: num.value])

    def int_out(self, name: str, *args: Any) -> tuple[int, int]:
        out = ctypes.c_int(-1)
        rc = getattr(self.lib, name)(*args, ctypes.byref(out))
        return rc, out.value

    def uint_out(self, name: str, *args: Any) -> tuple[int, int]:
        out = ctypes.c_uint(0xDEAD)
        rc = getattr(self.lib, name)(*args, ctypes.byref(out))
        return rc, out.value

    def struct_out(self, name: str, cls: type[ctypes.Structure], *args: Any) -> tuple[int, Any]:
        out = cls()
        rc = getattr(self.lib, name)(*args, ctypes.byref(out))
        return rc, out

    def health(self, card: int, dev: int) -> tuple[int, int]:
        return self.uint_out("dcmi_get_device_health", card, dev)

    def logic_id(self, card: int, dev: int) -> tuple[int, int]:
        out = ctypes.c_int(-1)
        rc = self.lib.dcmi_get_device_logic_id(ctypes.byref(out), card, dev)  # output first
        return rc, out.value

    def errors(self, card: int, dev: int) -> tuple[int, list[int]]:
        count, codes = ctypes.c_int(-1), (ctypes.c_uint * 128)()
        rc = self.lib.dcmi_get_device_errorcode_v2(card, dev, ctypes.byref(count), codes, ctypes.c_uint(128))
        return rc, list(codes[: max(count.value, 0)])

    def topo(self, c1: int, d1: int, c2: int, d2: int) -> tuple[int, int]:
        out = ctypes.c_int(-1)
        rc = self.lib.dcmi_get_topo_info_by_device_id(c1, d1, c2, d2, ctypes.byref(out))
        return rc, out.value

    def die(self, card: int, dev: int, kind: int) -> tuple[int, list[int]]:
        rc, die = self.struct_out("dcmi_get_device_die_v2", DieId, card, dev, kind)
        return rc, list(die.soc_die)

    def create(self, card: int, dev: int, template: str, vdev_id: int = AUTO) -> tuple[int, CreateVdevOut]:
        res = CreateVdevRes(vdev_id=vdev_id, vfg_id=AUTO, template_name=template.encode())
        out = CreateVdevOut()
        rc = self.lib.dcmi_create_vdevice(card, dev, ctypes.byref(res), ctypes.byref(out))
        return rc, out

    def destroy(self, card: int, dev: int, vdev_id: int) -> int:
        return int(self.lib.dcmi_set_destroy_vdevice(card, dev, ctypes.c_uint(vdev_id)))

    def info(
        self, card: int, dev: int, sub: int, buf: ctypes.Structure, size: int | None = None
    ) -> tuple[int, int]:
        used = ctypes.c_uint(ctypes.sizeof(buf) if size is None else size)
        rc = self.lib.dcmi_get_device_info(
            card, dev, VDEV_MNG, ctypes.c_uint(sub), ctypes.byref(buf), ctypes.byref(used)
        )
        return rc, used.value

    def total(self, card: int, dev: int) -> tuple[int, SocTotalResource]:
        buf = SocTotalResource()
        rc, _ = self.info(card, dev, GET_TOTAL_RESOURCE, buf)
        return rc, buf

    def vnpu_ids(self, card: int, dev: int) -> list[int]:
        rc, total = self.total(card, dev)
        assert rc == OK
        return list(total.vdev_id[: total.vdev_num])


@pytest.fixture
def dcmi(fake_dcmi_lib: Path) -> Dcmi:
    return Dcmi(fake_dcmi_lib)


@pytest.fixture
def b910(prepare_fake_ascend_node: Prepare, dcmi: Dcmi) -> Iterator[FakeAscendNode]:
    """An initialised 8-chip 910B node; its control is cleared afterwards (no hang outlives the test)."""
    node = prepare_fake_ascend_node(node_910b())
    assert dcmi.init() == OK
    yield node
    node.control.clear()


def _exported(lib: Path) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    out = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def _fresh_process(code: str, env: dict[str, str]) -> dict[str, Any]:
    """Run ``code`` (which prints one JSON line) in a new interpreter: a library never initialised there."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=60
    )
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


# ---- ABI ------------------------------------------------------------------------------------------------


def test_struct_layouts_match_the_design_file() -> None:
    sizes = {
        ChipInfo: 100,
        ChipInfoV2: 132,
        PcieInfo: 28,
        PcieInfoAll: 64,
        BoardInfo: 16,
        DieId: 20,
        HbmInfo: 32,
        MemoryInfoV3: 112,
        SpodInfo: 48,
        BaseResource: 64,
        ComputingResource: 96,
        MediaResource: 56,
        CreateVdevRes: 104,
        CreateVdevOut: 52,
        VdevQueryInfo: 256,
        VdevQuery: 264,
        SocTotalResource: 360,
        SocFreeResource: 224,
        EventFilter: 48,
        DmsFaultEvent: 352,
        Event: 360,
    }
    assert {c.__name__: ctypes.sizeof(c) for c in sizes} == {c.__name__: n for c, n in sizes.items()}
    offsets = {
        (ChipInfoV2, "npu_name"): 100,
        (PcieInfoAll, "domain"): 16,
        (PcieInfoAll, "bdf_funcid"): 28,
        (HbmInfo, "memory_usage"): 16,
        (HbmInfo, "bandwith_util_rate"): 28,
        (MemoryInfoV3, "hugepagesize"): 24,
        (MemoryInfoV3, "utiliza"): 48,
        (ComputingResource, "memory_size"): 24,
        (ComputingResource, "device_aicpu"): 54,
        (ComputingResource, "vdev_memory_free"): 72,
        (CreateVdevRes, "template_name"): 8,
        (VdevQueryInfo, "container_id"): 32,
        (VdevQueryInfo, "computing"): 104,
        (VdevQueryInfo, "media"): 200,
        (VdevQuery, "query_info"): 8,
        (SocTotalResource, "vfg_num"): 132,
        (SocTotalResource, "base"): 144,
        (SocTotalResource, "computing"): 208,
        (SocTotalResource, "media"): 304,
        (EventFilter, "node_type"): 13,
        (EventFilter, "resv"): 14,
        (DmsFaultEvent, "alarm_raised_time"): 24,
        (DmsFaultEvent, "additional_info"): 288,
        (Event, "dms_event"): 8,
    }
    assert {f"{c.__name__}.{f}": getattr(c, f).offset for c, f in offsets} == {
        f"{c.__name__}.{f}": n for (c, f), n in offsets.items()
    }


def test_exports_the_dcmi_api_and_nothing_else(fake_dcmi_lib: Path) -> None:
    ours = _exported(fake_dcmi_lib)
    assert ours >= MINIMUM_SYMBOLS
    assert {name for name in ours if not name.startswith("dcmi_")} == set()


def test_build_is_cached_by_source_hash(fake_dcmi_build_dir: Path, fake_dcmi_lib: Path) -> None:
    assert build_fake_dcmi(fake_dcmi_build_dir) == fake_dcmi_lib
    assert fake_dcmi_lib.name == "libdcmi.so"


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-compiler-hcs")
    with pytest.raises(FakeBuildError, match="C compiler 'no-such-compiler-hcs' not found"):
        build_fake_dcmi(tmp_path)


def test_omitted_symbol_is_missing_and_the_rest_work(
    fake_dcmi_without: Callable[..., Path], prepare_fake_ascend_node: Prepare
) -> None:
    old_driver = fake_dcmi_without("dcmi_get_device_die_v2", "dcmi_get_topo_info_by_device_id")
    assert old_driver.parent != fake_dcmi_without().parent
    assert "dcmi_get_device_die_v2" not in _exported(old_driver)
    prepare_fake_ascend_node(node_910b())
    lib = Dcmi(old_driver)
    with pytest.raises(AttributeError):
        _ = lib.lib.dcmi_get_device_die_v2
    with pytest.raises(AttributeError):
        _ = lib.lib.dcmi_get_topo_info_by_device_id
    assert lib.init() == OK
    assert lib.health(0, 0) == (OK, 0)


# ---- init, absent node, malformed node ---------------------------------------------------------------


def test_calls_before_init_and_without_a_node_answer_inner_error(fake_dcmi_lib: Path, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", NODE_ENV: str(tmp_path / "missing.json")}
    code = f"""
import ctypes, json
lib = ctypes.CDLL({str(fake_dcmi_lib)!r})
n, ids = ctypes.c_int(), (ctypes.c_int * 64)()
before = lib.dcmi_get_card_list(ctypes.byref(n), ids, 64)
print(json.dumps({{"before": before, "init": lib.dcmi_init()}}))
"""
    assert _fresh_process(code, env) == {"before": INNER_ERR, "init": INNER_ERR}


def test_malformed_node_file_fails_init_naming_the_file(
    dcmi: Dcmi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    bad = node_910b(2)
    bad["chips"][1]["phy_id"] = 0
    files = write_node(bad, tmp_path)
    monkeypatch.setenv(NODE_ENV, str(files.node))
    assert dcmi.init() == INNER_ERR
    assert dcmi.cards()[0] == INNER_ERR  # a failed init leaves the library uninitialised
    err = capfd.readouterr().err
    assert str(files.node) in err and "chips[1]: two chips with the same phy_id" in err


def test_fail_init_and_heal(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    b910.control.fail_init(-8005)
    assert dcmi.init() == INNER_ERR
    assert dcmi.health(0, 0)[0] == INNER_ERR
    b910.control.fail_init(0)
    assert dcmi.init() == OK
    assert dcmi.health(0, 0) == (OK, 0)


# ---- enumeration per preset --------------------------------------------------------------------------


def _chip_names(dcmi: Dcmi, card: int, dev: int) -> tuple[str, str, int]:
    rc, info = dcmi.struct_out("dcmi_get_device_chip_info", ChipInfo, card, dev)
    assert rc == OK
    return info.chip_type.decode(), info.chip_name.decode(), info.aicore_cnt


def _layout(dcmi: Dcmi) -> list[tuple[int, int, int, int]]:
    """(card, device, logic, phy) for every chip, walked the way MindX walks it (§2.1)."""
    rc, cards = dcmi.cards()
    assert rc == OK
    chips = []
    for card in cards:
        rc, count = dcmi.int_out("dcmi_get_device_num_in_card", card)
        assert rc == OK
        for dev in range(count):
            rc, logic = dcmi.logic_id(card, dev)
            assert rc == OK
            rc, phy = dcmi.uint_out("dcmi_get_device_phyid_from_logicid", ctypes.c_uint(logic))
            assert rc == OK
            chips.append((card, dev, logic, phy))
    return chips


def test_910b_node_enumerates_as_eight_single_chip_cards(
    prepare_fake_ascend_node: Prepare, dcmi: Dcmi
) -> None:
    node = prepare_fake_ascend_node(node_910b())
    description = json.loads(node.files.node.read_text())
    assert dcmi.init() == OK
    assert _layout(dcmi) == [(i, 0, i, i) for i in range(8)]
    assert _chip_names(dcmi, 3, 0) == ("Ascend", "910B3", 20)
    rc, hbm = dcmi.struct_out("dcmi_get_device_hbm_info", HbmInfo, 3, 0)
    assert (rc, hbm.memory_size) == (OK, 65536)
    assert dcmi.struct_out("dcmi_get_device_memory_info_v3", MemoryInfoV3, 3, 0)[0] == NOT_SUPPORT  # no DDR
    rc, pci = dcmi.struct_out("dcmi_get_device_pcie_info_v2", PcieInfoAll, 0, 0)
    assert (rc, pci.venderid, pci.deviceid, pci.domain, pci.bdf_busid, pci.bdf_deviceid) == (
        OK,
        0x19E5,
        0xD802,
        0,
        0xC1,
        0,
    )
    rc, old = dcmi.struct_out("dcmi_get_device_pcie_info", PcieInfo, 0, 0)
    assert (rc, old.deviceid, old.venderid, old.bdf_busid) == (OK, 0xD802, 0x19E5, 0xC1)
    assert dcmi.die(5, 0, VDIE) == (OK, description["chips"][5]["die_id"]["vdie"])
    assert dcmi.die(5, 0, NDIE)[0] == NOT_SUPPORT  # NDIE only on 910 A1
    assert {dcmi.topo(a, 0, b, 0) for a in range(8) for b in range(8) if a != b} == {(OK, HCCS)}
    assert dcmi.topo(2, 0, 2, 0) == (OK, SELF)
    buf, length = ctypes.create_string_buffer(32), ctypes.c_int(32)
    rc = dcmi.lib.dcmi_get_affinity_cpu_info_by_device_id(0, 0, buf, ctypes.byref(length))
    assert (rc, buf.value, length.value) == (OK, b"144-191", 7)
    version = ctypes.create_string_buffer(64)
    assert dcmi.lib.dcmi_get_driver_version(version, ctypes.c_uint(64)) == OK and version.value == b"24.1.rc3"
    assert dcmi.lib.dcmi_get_driver_version(version, ctypes.c_uint(4)) == INVALID_PARAMETER
    assert dcmi.health(8, 0)[0] == INVALID_DEVICE_ID
    assert dcmi.health(0, 1)[0] == INVALID_DEVICE_ID


def test_910_a1_node_has_ndie_and_no_topology(prepare_fake_ascend_node: Prepare, dcmi: Dcmi) -> None:
    prepare_fake_ascend_node(node_910_a1())
    assert dcmi.init() == OK
    assert _layout(dcmi) == [(i, 0, i, i) for i in range(8)]
    assert _chip_names(dcmi, 4, 0) == ("Ascend", "910A", 30)
    rc, pci = dcmi.struct_out("dcmi_get_device_pcie_info_v2", PcieInfoAll, 4, 0)
    assert (rc, pci.deviceid) == (OK, 0xD801)
    rc, ndie = dcmi.die(4, 0, NDIE)
    assert rc == OK and ndie != dcmi.die(4, 0, VDIE)[1]
    assert dcmi.topo(0, 0, 1, 0) == (NOT_SUPPORT, -1)  # the driver answers topology only on 910B / A3
    assert dcmi.uint_out("dcmi_get_device_network_health", 0, 0) == (OK, 0)


def test_a3_node_has_two_dies_per_card_and_an_mcu(prepare_fake_ascend_node: Prepare, dcmi: Dcmi) -> None:
    prepare_fake_ascend_node(node_a3(superpod=True))
    assert dcmi.init() == OK
    assert _layout(dcmi) == [(c, d, 2 * c + d, 2 * c + d) for c in range(8) for d in range(2)]
    dev_max, mcu, cpu = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    rc = dcmi.lib.dcmi_get_device_id_in_card(3, ctypes.byref(dev_max), ctypes.byref(mcu), ctypes.byref(cpu))
    assert (rc, dev_max.value, mcu.value, cpu.value) == (OK, 2, 2, -1)
    assert dcmi.int_out("dcmi_get_device_type", 3, 2) == (OK, 1)  # MCU
    assert dcmi.int_out("dcmi_get_device_type", 3, 1) == (OK, 0)  # NPU
    rc, board = dcmi.struct_out("dcmi_get_device_board_info", BoardInfo, 3, 1)
    assert (rc, board.board_id) == (OK, 0xB0)  # how A3 is told apart from 910B (§2.4)
    rc, v2 = dcmi.struct_out("dcmi_get_device_chip_info_v2", ChipInfoV2, 3, 1)
    assert (rc, v2.chip_name, v2.npu_name, v2.aicore_cnt) == (OK, b"Ascend910", b"Ascend910_9392", 24)
    assert dcmi.topo(3, 0, 3, 1) == (OK, SIO)
    assert dcmi.topo(3, 0, 4, 1) == (OK, HCCS_SW)
    rc, pair = ctypes.c_int(-1), ctypes.c_int(-1)
    assert dcmi.lib.dcmi_get_card_id_device_id_from_phyid(ctypes.byref(rc), ctypes.byref(pair), 7) == OK
    assert (rc.value, pair.value) == (3, 1)
    spod, size = SpodInfo(), ctypes.c_uint(ctypes.sizeof(SpodInfo))
    assert (
        dcmi.lib.dcmi_get_device_info(3, 1, 12, ctypes.c_uint(1), ctypes.byref(spod), ctypes.byref(size))
        == OK
    )
    assert (spod.sdid, spod.super_pod_size, size.value) == (7, 384, 48)


def test_310p_duo_node_has_slot_numbered_cards_and_ddr(prepare_fake_ascend_node: Prepare, dcmi: Dcmi) -> None:
    node = prepare_fake_ascend_node(node_310p_duo(cards=2))
    assert dcmi.init() == OK
    assert _layout(dcmi) == [(1, 0, 0, 0), (1, 1, 1, 1), (2, 0, 2, 2), (2, 1, 3, 3)]
    assert _chip_names(dcmi, 2, 1) == ("Ascend", "310P3", 8)
    rc, mem = dcmi.struct_out("dcmi_get_device_memory_info_v3", MemoryInfoV3, 2, 1)
    assert (rc, mem.memory_size, mem.hugepagesize) == (OK, 24576, 2048)
    assert dcmi.struct_out("dcmi_get_device_hbm_info", HbmInfo, 2, 1)[0] == NOT_SUPPORT
    assert dcmi.topo(1, 0, 1, 1) == (NOT_SUPPORT, -1)
    assert dcmi.health(0, 0)[0] == INVALID_DEVICE_ID  # there is no card 0
    dev = node.host_root / "dev"
    assert {p.name for p in dev.iterdir()} == {
        "davinci0",
        "davinci1",
        "davinci2",
        "davinci3",
        "davinci_manager",
        "devmm_svm",
        "hisi_hdc",
        "dvpp_cmdlist",
    }
    assert (node.host_root / "sys/bus/pci/devices/0000:5b:00.0/numa_node").read_text() == "1\n"


def test_host_tree_of_a_training_node_has_no_dvpp_cmdlist(prepare_fake_ascend_node: Prepare) -> None:
    node = prepare_fake_ascend_node(node_910b(2))
    assert sorted(p.name for p in (node.host_root / "dev").iterdir()) == [
        "davinci0",
        "davinci1",
        "davinci_manager",
        "devmm_svm",
        "hisi_hdc",
    ]
    assert (node.host_root / "sys/bus/pci/devices/0000:c2:00.0/numa_node").read_text() == "3\n"


# ---- control: health, error codes, drop, removed card, not supported -----------------------------------


def test_health_and_error_codes_change_and_recover(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    assert dcmi.health(3, 0) == (OK, 0)
    assert dcmi.errors(3, 0) == (OK, [])
    b910.control.set_health(3, 2)
    b910.control.set_error_codes(3, [0x80E01801, 0x80CB8009])
    assert dcmi.health(3, 0) == (OK, 2)
    assert dcmi.errors(3, 0) == (OK, [0x80E01801, 0x80CB8009])
    assert dcmi.health(4, 0) == (OK, 0)  # only that chip
    b910.control.set_health(3, 1)
    assert dcmi.health(3, 0) == (OK, 1)
    b910.control.set_health(3, 0)
    b910.control.set_error_codes(3, [])
    assert (dcmi.health(3, 0), dcmi.errors(3, 0)) == ((OK, 0), (OK, []))
    text = ctypes.create_string_buffer(64)
    rc = dcmi.lib.dcmi_get_device_errorcode_string(3, 0, ctypes.c_uint(0x80E01801), text, 64)
    assert (rc, text.value) == (OK, b"fake fault 0x80E01801")


def test_dropped_chip_answers_not_ready_until_it_is_back(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    b910.control.drop(6)
    assert dcmi.health(6, 0)[0] == NOT_READY  # MindX's card-drop signal (§2.3)
    assert dcmi.struct_out("dcmi_get_device_chip_info", ChipInfo, 6, 0)[0] == NOT_READY
    assert dcmi.logic_id(6, 0) == (OK, 6)  # the id tables still know it
    assert dcmi.health(5, 0) == (OK, 0)
    b910.control.undrop(6)
    assert dcmi.health(6, 0) == (OK, 0)


def test_removed_card_is_missing_from_the_list_until_restored(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    b910.control.remove_card(2)
    assert dcmi.cards() == (OK, [0, 1, 3, 4, 5, 6, 7])
    assert dcmi.int_out("dcmi_get_device_num_in_card", 2)[0] == DEVICE_NOT_EXIST
    assert dcmi.health(2, 0)[0] == DEVICE_NOT_EXIST
    assert dcmi.uint_out("dcmi_get_device_logicid_from_phyid", ctypes.c_uint(2))[0] == DEVICE_NOT_EXIST
    b910.control.restore_card(2)
    assert dcmi.cards() == (OK, list(range(8)))
    assert dcmi.health(2, 0) == (OK, 0)


def test_not_supported_call_answers_minus_8255(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    b910.control.not_supported("dcmi_get_device_hbm_info")
    assert dcmi.struct_out("dcmi_get_device_hbm_info", HbmInfo, 0, 0)[0] == NOT_SUPPORT
    assert dcmi.health(0, 0) == (OK, 0)
    b910.control.supported("dcmi_get_device_hbm_info")
    assert dcmi.struct_out("dcmi_get_device_hbm_info", HbmInfo, 0, 0)[0] == OK


# ---- a hung chip -------------------------------------------------------------------------------------------


def test_hung_chip_blocks_only_its_own_calls(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    b910.control.hang(1, 120)
    done = threading.Event()
    result: list[tuple[int, int]] = []

    def hung_call() -> None:
        result.append(dcmi.health(1, 0))
        done.set()

    thread = threading.Thread(target=hung_call, daemon=True)
    thread.start()
    try:
        for _ in range(20):  # meanwhile every other chip answers, from this thread, at once
            assert dcmi.health(0, 0) == (OK, 0)
            assert dcmi.errors(7, 0) == (OK, [])
            assert dcmi.logic_id(1, 0) == (OK, 1)  # a table look-up, not a call to the chip
        assert not done.is_set(), "the hung chip answered while it should still be blocked"
    finally:
        b910.control.hang(1, 0)  # ends the hang: the blocked call wakes and answers normally
    assert done.wait(10), "the hung call did not return after the hang ended"
    thread.join(10)
    assert result == [(OK, 0)]


def test_short_hang_blocks_then_answers(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    b910.control.hang(2, 0.05)
    assert dcmi.health(2, 0) == (OK, 0)
    b910.control.hang(2, 0)


def test_concurrent_calls_on_all_chips_while_control_changes(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    failures: list[tuple[int, Any]] = []

    def worker(card: int) -> None:
        for _ in range(200):
            rc, health = dcmi.health(card, 0)
            if rc != OK or health not in (0, 2):
                failures.append((card, (rc, health)))

    threads = [threading.Thread(target=worker, args=(card,)) for card in range(8)]
    for t in threads:
        t.start()
    for flip in range(20):
        b910.control.set_health(flip % 8, 2 if flip % 2 else 0)
    for t in threads:
        t.join(30)
    assert failures == []


# ---- vNPU --------------------------------------------------------------------------------------------------


def test_vnpu_create_query_destroy(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    assert dcmi.vnpu_ids(5, 0) == []
    rc, out = dcmi.create(5, 0, "vir05_1c_16g")
    assert (rc, out.vdev_id, out.pcie_bus, out.pcie_func, out.vfg_id) == (OK, 180, 0x02, 1, 0)  # 100 + 16 x 5
    assert (b910.host_root / "dev/vdavinci180").exists()
    rc, out2 = dcmi.create(5, 0, "vir10_3c_32g")
    assert (rc, out2.vdev_id, out2.vfg_id) == (OK, 181, 1)
    rc, total = dcmi.total(5, 0)
    assert (rc, list(total.vdev_id[: total.vdev_num]), total.vfg_num, total.computing.aic) == (
        OK,
        [180, 181],
        2,
        20.0,
    )
    assert (total.computing.memory_size, total.computing.vdev_memory_free) == (65536, 65536 - 16384 - 32768)
    query = VdevQuery(vdev_id=181)
    assert dcmi.info(5, 0, GET_VDEV_RESOURCE, query) == (OK, 264)
    info = query.query_info
    assert (info.name, info.computing.aic, info.computing.memory_size, info.computing.device_aicpu) == (
        b"vir10_3c_32g",
        10.0,
        32768,
        3,
    )
    assert (info.vfid, info.vfg_id, info.is_container_used) == (2, 1, 0)
    free = SocFreeResource()
    assert dcmi.info(5, 0, GET_FREE_RESOURCE, free) == (OK, 224)
    assert (free.computing.aic, free.computing.memory_size) == (5.0, 16384)
    assert dcmi.info(5, 0, GET_TOTAL_RESOURCE, SocTotalResource(), size=100)[0] == INVALID_PARAMETER
    assert dcmi.info(5, 0, 5, SocTotalResource())[0] == NOT_SUPPORT  # GET_VDEV_ACTIVITY
    assert dcmi.vnpu_ids(4, 0) == []  # other chips are untouched
    assert dcmi.destroy(5, 0, 180) == OK
    assert dcmi.vnpu_ids(5, 0) == [181]
    assert not (b910.host_root / "dev/vdavinci180").exists()
    assert dcmi.destroy(5, 0, 180) == DEVICE_NOT_EXIST
    assert dcmi.destroy(4, 0, 181) == DEVICE_NOT_EXIST  # it lives on another chip
    assert dcmi.destroy(5, 0, 181) == OK
    assert json.loads(b910.files.state.read_text()) == {"vnpus": []}


def test_vnpu_templates_and_resources_are_checked(b910: FakeAscendNode, dcmi: Dcmi) -> None:
    assert dcmi.create(0, 0, "vir02")[0] == INVALID_PARAMETER  # a 310P / A1 template on a 910B3
    assert dcmi.create(0, 0, "vir10_3c_16g")[0] == INVALID_PARAMETER  # another 910B bin's
    assert dcmi.create(0, 0, "vir10_3c_32g")[0] == OK
    assert dcmi.create(0, 0, "vir10_3c_32g")[0] == OK
    assert dcmi.create(0, 0, "vir05_1c_16g")[0] == RESOURCE_OCCUPIED  # 20 of 20 AI cores taken
    assert dcmi.create(1, 0, "vir05_1c_16g", vdev_id=99)[0] == INVALID_PARAMETER  # below [100, 1124)
    assert dcmi.create(1, 0, "vir05_1c_16g", vdev_id=100)[0] == INVALID_PARAMETER  # taken on chip 0
    rc, out = dcmi.create(1, 0, "vir05_1c_16g", vdev_id=500)
    assert (rc, out.vdev_id) == (OK, 500)
    b910.control.set_vnpu_in_use(500)
    query = VdevQuery(vdev_id=500)
    assert dcmi.info(1, 0, GET_VDEV_RESOURCE, query)[0] == OK and query.query_info.is_container_used == 1
    assert dcmi.destroy(1, 0, 500) == RESOURCE_OCCUPIED
    assert dcmi.destroy(0, 0, 0xFFFF) == OK  # every vNPU of chip 0
    assert dcmi.vnpu_ids(0, 0) == []
    b910.control.set_vnpu_in_use(500, False)
    assert dcmi.destroy(1, 0, 500) == OK


def test_vnpu_on_a_310p_die_and_unsupported_families(prepare_fake_ascend_node: Prepare, dcmi: Dcmi) -> None:
    prepare_fake_ascend_node(node_310p_duo(cards=1))
    assert dcmi.init() == OK
    rc, out = dcmi.create(1, 1, "vir04_3c_ndvpp")
    assert (rc, out.vdev_id) == (OK, 116)
    assert dcmi.create(1, 1, "vir04")[0] == OK
    assert dcmi.create(1, 1, "vir01")[0] == RESOURCE_OCCUPIED  # 8 of 8 AI cores
    assert dcmi.create(1, 1, "vir05_1c_16g")[0] == INVALID_PARAMETER
    no_vnpu = node_910b(1)
    del no_vnpu["chips"][0]["vnpu"]
    prepare_fake_ascend_node(no_vnpu)
    assert dcmi.init() == OK
    assert dcmi.create(0, 0, "vir05_1c_16g")[0] == NOT_SUPPORT
    assert dcmi.total(0, 0)[0] == NOT_SUPPORT


def test_vnpus_survive_a_restart_and_another_process(
    b910: FakeAscendNode, dcmi: Dcmi, fake_dcmi_lib: Path
) -> None:
    assert dcmi.create(7, 0, "vir05_1c_16g")[0] == OK
    assert dcmi.create(7, 0, "vir05_1c_16g")[0] == OK
    assert dcmi.init() == OK  # a new backend instance in this process
    assert dcmi.vnpu_ids(7, 0) == [212, 213]
    env = {"PATH": "/usr/bin:/bin", NODE_ENV: str(b910.files.node)}
    code = f"""
import ctypes, json
lib = ctypes.CDLL({str(fake_dcmi_lib)!r})
assert lib.dcmi_init() == 0
class Total(ctypes.Structure):
    _fields_ = [("vdev_num", ctypes.c_uint), ("vdev_id", ctypes.c_uint * 32), ("rest", ctypes.c_ubyte * 224)]
total, size = Total(), ctypes.c_uint(360)
rc = lib.dcmi_get_device_info(7, 0, 52, 1, ctypes.byref(total), ctypes.byref(size))
destroyed = lib.dcmi_set_destroy_vdevice(7, 0, 212)
print(json.dumps({{"rc": rc, "ids": list(total.vdev_id[: total.vdev_num]), "destroyed": destroyed}}))
"""
    assert _fresh_process(code, env) == {"rc": OK, "ids": [212, 213], "destroyed": OK}
    assert dcmi.init() == OK  # the other process destroyed one: a re-init sees it
    assert dcmi.vnpu_ids(7, 0) == [213]
    assert [v["vdev_id"] for v in json.loads(b910.files.state.read_text())["vnpus"]] == [213]
