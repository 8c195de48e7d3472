"""The ctypes structs against the sizes and offsets of ascend.md §2 (gcc, LP64), one table row each.

A wrong size here would let the driver write past a Python buffer; the fake's own ``_Static_assert``s
pin the C side, this pins ours.
"""

from __future__ import annotations

import ctypes

import pytest

from vendors.ascend import abi

SIZES: list[tuple[type[ctypes.Structure], int]] = [
    (abi.ChipInfo, 100),
    (abi.ChipInfoV2, 132),
    (abi.PcieInfoAll, 64),
    (abi.PcieInfo, 28),
    (abi.DieId, 20),
    (abi.HbmInfo, 32),
    (abi.MemoryInfoV3, 112),
    (abi.MemoryInfoV1, 16),
    (abi.BoardInfo, 16),
    (abi.IpAddr, 20),
    (abi.CreateVdevRes, 104),
    (abi.CreateVdevOut, 52),
    (abi.BaseResource, 64),
    (abi.ComputingResource, 96),
    (abi.MediaResource, 56),
    (abi.VdevQueryInfo, 256),
    (abi.VdevQuery, 264),
    (abi.SocTotalResource, 360),
    (abi.SocFreeResource, 224),
    (abi.SpodInfo, 48),
    (abi.EventFilter, 48),
    (abi.DmsFaultEvent, 352),
    (abi.Event, 360),
]

OFFSETS: list[tuple[type[ctypes.Structure], str, int]] = [
    (abi.ChipInfo, "chip_name", 32),
    (abi.ChipInfo, "chip_ver", 64),
    (abi.ChipInfo, "aicore_cnt", 96),
    (abi.ChipInfoV2, "npu_name", 100),
    (abi.PcieInfoAll, "domain", 16),
    (abi.PcieInfoAll, "bdf_busid", 20),
    (abi.PcieInfoAll, "bdf_deviceid", 24),
    (abi.PcieInfoAll, "bdf_funcid", 28),
    (abi.PcieInfoAll, "reserve", 32),
    (abi.HbmInfo, "freq", 8),
    (abi.HbmInfo, "memory_usage", 16),
    (abi.HbmInfo, "temp", 24),
    (abi.HbmInfo, "bandwith_util_rate", 28),
    (abi.MemoryInfoV3, "memory_available", 8),
    (abi.MemoryInfoV3, "freq", 16),
    (abi.MemoryInfoV3, "hugepagesize", 24),
    (abi.MemoryInfoV3, "hugepages_total", 32),
    (abi.MemoryInfoV3, "hugepages_free", 40),
    (abi.MemoryInfoV3, "utiliza", 48),
    (abi.MemoryInfoV3, "reserve", 52),
    (abi.IpAddr, "ip_type", 16),
    (abi.CreateVdevRes, "vfg_id", 4),
    (abi.CreateVdevRes, "template_name", 8),
    (abi.CreateVdevRes, "reserved", 40),
    (abi.CreateVdevOut, "vfg_id", 16),
    (abi.CreateVdevOut, "reserved", 20),
    (abi.BaseResource, "task_timeout", 16),
    (abi.BaseResource, "vfg_id", 24),
    (abi.BaseResource, "vip_mode", 28),
    (abi.BaseResource, "reserved", 29),
    (abi.ComputingResource, "aiv", 4),
    (abi.ComputingResource, "dsa", 8),
    (abi.ComputingResource, "pcie_dma", 22),
    (abi.ComputingResource, "memory_size", 24),
    (abi.ComputingResource, "event_id", 32),
    (abi.ComputingResource, "model_id", 44),
    (abi.ComputingResource, "topic_schedule_aicpu", 48),
    (abi.ComputingResource, "topic_ctrl_cpu_slot", 56),
    (abi.ComputingResource, "vdev_aicore_utilization", 60),
    (abi.ComputingResource, "vdev_memory_total", 64),
    (abi.ComputingResource, "vdev_memory_free", 72),
    (abi.ComputingResource, "reserved", 80),
    (abi.VdevQueryInfo, "status", 16),
    (abi.VdevQueryInfo, "is_container_used", 20),
    (abi.VdevQueryInfo, "vfid", 24),
    (abi.VdevQueryInfo, "vfg_id", 28),
    (abi.VdevQueryInfo, "container_id", 32),
    (abi.VdevQueryInfo, "base", 40),
    (abi.VdevQueryInfo, "computing", 104),
    (abi.VdevQueryInfo, "media", 200),
    (abi.VdevQuery, "query_info", 8),
    (abi.SocTotalResource, "vdev_id", 4),
    (abi.SocTotalResource, "vfg_num", 132),
    (abi.SocTotalResource, "vfg_bitmap", 136),
    (abi.SocTotalResource, "base", 144),
    (abi.SocTotalResource, "computing", 208),
    (abi.SocTotalResource, "media", 304),
    (abi.SocFreeResource, "base", 8),
    (abi.SocFreeResource, "computing", 72),
    (abi.SocFreeResource, "media", 168),
    (abi.EventFilter, "event_id", 8),
    (abi.EventFilter, "severity", 12),
    (abi.EventFilter, "node_type", 13),
    (abi.EventFilter, "resv", 14),
    (abi.DmsFaultEvent, "deviceid", 4),
    (abi.DmsFaultEvent, "node_type", 6),
    (abi.DmsFaultEvent, "assertion", 11),
    (abi.DmsFaultEvent, "event_serial_num", 12),
    (abi.DmsFaultEvent, "notify_serial_num", 16),
    (abi.DmsFaultEvent, "alarm_raised_time", 24),
    (abi.DmsFaultEvent, "event_name", 32),
    (abi.DmsFaultEvent, "additional_info", 288),
    (abi.DmsFaultEvent, "resv", 320),
    (abi.Event, "event_t", 8),
]


@pytest.mark.parametrize(("struct", "size"), SIZES, ids=[s.__name__ for s, _ in SIZES])
def test_struct_size(struct: type[ctypes.Structure], size: int) -> None:
    assert ctypes.sizeof(struct) == size


@pytest.mark.parametrize(
    ("struct", "name", "offset"), OFFSETS, ids=[f"{s.__name__}.{n}" for s, n, _ in OFFSETS]
)
def test_field_offset(struct: type[ctypes.Structure], name: str, offset: int) -> None:
    assert getattr(struct, name).offset == offset


def test_return_codes_are_named_as_the_header_names_them() -> None:
    assert abi.return_code_name(-8012) == "ERR_CODE_NOT_REDAY"
    assert abi.return_code_name(-8255) == "ERR_CODE_NOT_SUPPORT"
    assert abi.return_code_name(-99998) == "SYMBOL_MISSING"
    assert abi.return_code_name(-1234) == "UNKNOWN_-1234"


@pytest.mark.parametrize(
    ("raw", "text"), [(b"910B3\0garbage", "910B3"), (b"\0", ""), (b"Ascend\xff\0", "Ascend\ufffd")]
)
def test_c_strings_stop_at_the_first_nul(raw: bytes, text: str) -> None:
    assert abi.text(raw) == text
