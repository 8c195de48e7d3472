"""The DCMI ABI as ctypes sees it: struct layouts, enum values, sub-commands and return codes.

Everything here is copied from the vendor header as ascend.md §2 records it (sizes and offsets from
compiling the MindX copy of ``dcmi_interface_api.h`` with gcc on LP64); ``tests/ascend/test_abi.py``
checks every size and offset against that table, so a typo here fails a test instead of corrupting
memory in the driver. ``unsigned long`` fields are ``c_ulong`` (8 bytes on LP64): the header comment that
calls ``dcmi_get_memory_info_stru`` 96 bytes is wrong, it is 112 (§2.4). Every enum is a C ``int``.
"""

from __future__ import annotations

import ctypes

# -- return codes (§2.9) --------------------------------------------------------------------------

DCMI_OK = 0
ERR_INVALID_PARAMETER = -8001
ERR_OPER_NOT_PERMITTED = -8002
ERR_INNER_ERR = -8005
ERR_TIME_OUT = -8006
ERR_DEVICE_NOT_EXIST = -8008
ERR_NOT_READY = -8012
ERR_RESOURCE_OCCUPIED = -8020
ERR_PARTITION_NOT_RIGHT = -8022
ERR_NOT_SUPPORT = -8255
# Not produced by the library: MindX's shim uses them, and so do we, for a symbol the library lacks
# and for a library that never loaded.
ERR_SYMBOL_MISSING = -99998
ERR_NOT_LOADED = -99999

RETURN_CODE_NAMES: dict[int, str] = {
    DCMI_OK: "DCMI_OK",
    -8001: "ERR_CODE_INVALID_PARAMETER",
    -8002: "ERR_CODE_OPER_NOT_PERMITTED",
    -8003: "ERR_CODE_MEM_OPERATE_FAIL",
    -8004: "ERR_CODE_SECURE_FUN_FAIL",
    -8005: "ERR_CODE_INNER_ERR",
    -8006: "ERR_CODE_TIME_OUT",
    -8007: "ERR_CODE_INVALID_DEVICE_ID",
    -8008: "ERR_CODE_DEVICE_NOT_EXIST",
    -8009: "ERR_CODE_IOCTL_FAIL",
    -8010: "ERR_CODE_SEND_MSG_FAIL",
    -8011: "ERR_CODE_RECV_MSG_FAIL",
    -8012: "ERR_CODE_NOT_REDAY",
    -8013: "ERR_CODE_NOT_SUPPORT_IN_CONTAINER",
    -8014: "ERR_CODE_FILE_OPERATE_FAIL",
    -8015: "ERR_CODE_RESET_FAIL",
    -8016: "ERR_CODE_ABORT_OPERATE",
    -8017: "ERR_CODE_IS_UPGRADING",
    -8020: "ERR_CODE_RESOURCE_OCCUPIED",
    -8022: "ERR_CODE_PARTITION_NOT_RIGHT",
    -8023: "ERR_CODE_CONFIG_INFO_NOT_EXIST",
    -8255: "ERR_CODE_NOT_SUPPORT",
    ERR_SYMBOL_MISSING: "SYMBOL_MISSING",
    ERR_NOT_LOADED: "LIBRARY_NOT_LOADED",
}


def return_code_name(code: int) -> str:
    """The header's name for ``code``, or ``UNKNOWN_<code>``."""
    return RETURN_CODE_NAMES.get(code, f"UNKNOWN_{code}")


# -- enums and constants ---------------------------------------------------------------------------

# enum dcmi_unit_type
NPU_TYPE, MCU_TYPE, CPU_TYPE, INVALID_TYPE = 0, 1, 2, 0xFF
# enum dcmi_die_type
NDIE, VDIE, DDIE = 0, 1, 2
# dcmi_get_device_health values (§2.3)
HEALTH_OK, HEALTH_MINOR, HEALTH_MAJOR, HEALTH_CRITICAL = 0, 1, 2, 3
HEALTH_ABSENT = 0xFFFFFFFF
ERROR_CODE_LIST_LEN = 128
CARD_LIST_LEN = 64
CARD_DROP_FAULT_CODE = 0x40F84E00  # MindX's synthetic code for health ret -8012
# enum dcmi_main_cmd (subset) and the sub-commands of VDEV_MNG
MAIN_CMD_CHIP_INF = 12
MAIN_CMD_HCCS = 16
MAIN_CMD_VDEV_MNG = 52
MAIN_CMD_SIO = 56
VMNG_SUB_CMD_GET_VDEV_RESOURCE = 0
VMNG_SUB_CMD_GET_TOTAL_RESOURCE = 1
VMNG_SUB_CMD_GET_FREE_RESOURCE = 2
VDEV_ID_ANY = 0xFFFFFFFF  # let the driver choose vdev_id / vfg_id
VDEV_ID_MIN, VDEV_ID_END = 100, 1124  # MindX's valid vNPU id range [100, 1124)
MAX_VDEV_NUM = 32
# topo_type of dcmi_get_topo_info_by_device_id (§2.7)
TOPO_SELF, TOPO_SYS, TOPO_PHB, TOPO_HCCS, TOPO_PXB, TOPO_PIX, TOPO_SIO, TOPO_HCCS_SW, TOPO_UB = range(9)
# Board ids that identify an A3 (910_93) module (§2.4); A3 has no chip name of its own.
A3_BOARD_IDS = frozenset({0xB0, 0xB1, 0xB2, 0xB3, 0xB4, 0x81, 0x83, 0xD1, 0xD3})

# -- structs (§2.4, §2.6, §2.8) ---------------------------------------------------------------------


class ChipInfo(ctypes.Structure):
    """``struct dcmi_chip_info`` (100 bytes)."""

    _fields_ = (
        ("chip_type", ctypes.c_ubyte * 32),
        ("chip_name", ctypes.c_ubyte * 32),
        ("chip_ver", ctypes.c_ubyte * 32),
        ("aicore_cnt", ctypes.c_uint),
    )


class ChipInfoV2(ctypes.Structure):
    """``struct dcmi_chip_info_v2`` (132 bytes): chip info plus the NPU name."""

    _fields_ = (
        ("chip_type", ctypes.c_ubyte * 32),
        ("chip_name", ctypes.c_ubyte * 32),
        ("chip_ver", ctypes.c_ubyte * 32),
        ("aicore_cnt", ctypes.c_uint),
        ("npu_name", ctypes.c_ubyte * 32),
    )


class PcieInfoAll(ctypes.Structure):
    """``struct dcmi_pcie_info_all`` (64 bytes), filled by ``dcmi_get_device_pcie_info_v2``."""

    _fields_ = (
        ("venderid", ctypes.c_uint),
        ("subvenderid", ctypes.c_uint),
        ("deviceid", ctypes.c_uint),
        ("subdeviceid", ctypes.c_uint),
        ("domain", ctypes.c_int),
        ("bdf_busid", ctypes.c_uint),
        ("bdf_deviceid", ctypes.c_uint),
        ("bdf_funcid", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 32),
    )


class PcieInfo(ctypes.Structure):
    """``struct dcmi_pcie_info`` (28 bytes, the old call; note its different field order)."""

    _fields_ = (
        ("deviceid", ctypes.c_uint),
        ("venderid", ctypes.c_uint),
        ("subvenderid", ctypes.c_uint),
        ("subdeviceid", ctypes.c_uint),
        ("bdf_deviceid", ctypes.c_uint),
        ("bdf_busid", ctypes.c_uint),
        ("bdf_funcid", ctypes.c_uint),
    )


class DieId(ctypes.Structure):
    """``struct dcmi_die_id`` (20 bytes)."""

    _fields_ = (("soc_die", ctypes.c_uint * 5),)


class HbmInfo(ctypes.Structure):
    """``struct dcmi_hbm_info`` (32 bytes); sizes in MB per MindX (unit unverified, §2.4)."""

    _fields_ = (
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("memory_usage", ctypes.c_ulonglong),
        ("temp", ctypes.c_int),
        ("bandwith_util_rate", ctypes.c_uint),
    )


class MemoryInfoV3(ctypes.Structure):
    """``struct dcmi_get_memory_info_stru`` (112 bytes on LP64, not the 96 the header comment says)."""

    _fields_ = (
        ("memory_size", ctypes.c_ulonglong),
        ("memory_available", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("hugepagesize", ctypes.c_ulong),
        ("hugepages_total", ctypes.c_ulong),
        ("hugepages_free", ctypes.c_ulong),
        ("utiliza", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 60),
    )


class MemoryInfoV1(ctypes.Structure):
    """``struct dcmi_memory_info_stru`` (16 bytes), the V1 memory call."""

    _fields_ = (
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("utiliza", ctypes.c_uint),
    )


class BoardInfo(ctypes.Structure):
    """``struct dcmi_board_info`` (16 bytes)."""

    _fields_ = (
        ("board_id", ctypes.c_uint),
        ("pcb_id", ctypes.c_uint),
        ("bom_id", ctypes.c_uint),
        ("slot_id", ctypes.c_uint),
    )


class _IpAddrUnion(ctypes.Union):
    _fields_ = (("ip6", ctypes.c_ubyte * 16), ("ip4", ctypes.c_ubyte * 4))


class IpAddr(ctypes.Structure):
    """``struct dcmi_ip_addr`` (20 bytes)."""

    _fields_ = (("u_addr", _IpAddrUnion), ("ip_type", ctypes.c_int))


class CreateVdevRes(ctypes.Structure):
    """``struct dcmi_create_vdev_res_stru`` (104 bytes): what ``dcmi_create_vdevice`` is asked for."""

    _fields_ = (
        ("vdev_id", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("template_name", ctypes.c_char * 32),
        ("reserved", ctypes.c_ubyte * 64),
    )


class CreateVdevOut(ctypes.Structure):
    """``struct dcmi_create_vdev_out`` (52 bytes): the new vNPU's id and PCIe function."""

    _fields_ = (
        ("vdev_id", ctypes.c_uint),
        ("pcie_bus", ctypes.c_uint),
        ("pcie_device", ctypes.c_uint),
        ("pcie_func", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("reserved", ctypes.c_ubyte * 32),
    )


class BaseResource(ctypes.Structure):
    """``struct dcmi_base_resource`` (64 bytes)."""

    _fields_ = (
        ("token", ctypes.c_ulonglong),
        ("token_max", ctypes.c_ulonglong),
        ("task_timeout", ctypes.c_ulonglong),
        ("vfg_id", ctypes.c_uint),
        ("vip_mode", ctypes.c_ubyte),
        ("reserved", ctypes.c_ubyte * 31),
    )


class ComputingResource(ctypes.Structure):
    """``struct dcmi_computing_resource`` (96 bytes); ``memory_size`` in MB."""

    _fields_ = (
        ("aic", ctypes.c_float),
        ("aiv", ctypes.c_float),
        ("dsa", ctypes.c_ushort),
        ("rtsq", ctypes.c_ushort),
        ("acsq", ctypes.c_ushort),
        ("cdqm", ctypes.c_ushort),
        ("c_core", ctypes.c_ushort),
        ("ffts", ctypes.c_ushort),
        ("sdma", ctypes.c_ushort),
        ("pcie_dma", ctypes.c_ushort),
        ("memory_size", ctypes.c_ulonglong),
        ("event_id", ctypes.c_uint),
        ("notify_id", ctypes.c_uint),
        ("stream_id", ctypes.c_uint),
        ("model_id", ctypes.c_uint),
        ("topic_schedule_aicpu", ctypes.c_ushort),
        ("host_ctrl_cpu", ctypes.c_ushort),
        ("host_aicpu", ctypes.c_ushort),
        ("device_aicpu", ctypes.c_ushort),
        ("topic_ctrl_cpu_slot", ctypes.c_ushort),
        ("vdev_aicore_utilization", ctypes.c_uint),
        ("vdev_memory_total", ctypes.c_ulonglong),
        ("vdev_memory_free", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ubyte * 12),
    )


class MediaResource(ctypes.Structure):
    """``struct dcmi_media_resource`` (56 bytes)."""

    _fields_ = (
        ("jpegd", ctypes.c_float),
        ("jpege", ctypes.c_float),
        ("vpc", ctypes.c_float),
        ("vdec", ctypes.c_float),
        ("pngd", ctypes.c_float),
        ("venc", ctypes.c_float),
        ("reserved", ctypes.c_ubyte * 32),
    )


class VdevQueryInfo(ctypes.Structure):
    """``struct dcmi_vdev_query_info`` (256 bytes): one vNPU's template, use and resources."""

    _fields_ = (
        ("name", ctypes.c_char * 16),
        ("status", ctypes.c_uint),
        ("is_container_used", ctypes.c_uint),
        ("vfid", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("container_id", ctypes.c_ulonglong),
        ("base", BaseResource),
        ("computing", ComputingResource),
        ("media", MediaResource),
    )


class VdevQuery(ctypes.Structure):
    """``struct dcmi_vdev_query_stru`` (264 bytes): ``vdev_id`` in, ``query_info`` out (VDEV_MNG/0)."""

    _fields_ = (("vdev_id", ctypes.c_uint), ("query_info", VdevQueryInfo))


class SocTotalResource(ctypes.Structure):
    """``struct dcmi_soc_total_resource`` (360 bytes): the vNPUs of a chip (VDEV_MNG/1)."""

    _fields_ = (
        ("vdev_num", ctypes.c_uint),
        ("vdev_id", ctypes.c_uint * 32),
        ("vfg_num", ctypes.c_uint),
        ("vfg_bitmap", ctypes.c_uint),
        ("base", BaseResource),
        ("computing", ComputingResource),
        ("media", MediaResource),
    )


class SocFreeResource(ctypes.Structure):
    """``struct dcmi_soc_free_resource`` (224 bytes): what is left for new vNPUs (VDEV_MNG/2)."""

    _fields_ = (
        ("vfg_num", ctypes.c_uint),
        ("vfg_bitmap", ctypes.c_uint),
        ("base", BaseResource),
        ("computing", ComputingResource),
        ("media", MediaResource),
    )


class SpodInfo(ctypes.Structure):
    """``struct dcmi_spod_info`` (48 bytes), CHIP_INF/SPOD_INFO on A3."""

    _fields_ = (
        ("sdid", ctypes.c_uint),
        ("scale_type", ctypes.c_uint),
        ("super_pod_id", ctypes.c_uint),
        ("server_id", ctypes.c_uint),
        ("chassis_id", ctypes.c_uint),
        ("super_pod_type", ctypes.c_uint),
        ("reserve", ctypes.c_uint * 6),
    )


class EventFilter(ctypes.Structure):
    """``struct dcmi_event_filter`` (48 bytes, passed by value to ``dcmi_subscribe_fault_event``)."""

    _fields_ = (
        ("filter_flag", ctypes.c_ulonglong),
        ("event_id", ctypes.c_uint),
        ("severity", ctypes.c_ubyte),
        ("node_type", ctypes.c_ubyte),
        ("resv", ctypes.c_ubyte * 32),
    )


class DmsFaultEvent(ctypes.Structure):
    """``struct dcmi_dms_fault_event`` (352 bytes); ``deviceid`` is a logic id."""

    _fields_ = (
        ("event_id", ctypes.c_uint),
        ("deviceid", ctypes.c_ushort),
        ("node_type", ctypes.c_ubyte),
        ("node_id", ctypes.c_ubyte),
        ("sub_node_type", ctypes.c_ubyte),
        ("sub_node_id", ctypes.c_ubyte),
        ("severity", ctypes.c_ubyte),
        ("assertion", ctypes.c_ubyte),
        ("event_serial_num", ctypes.c_int),
        ("notify_serial_num", ctypes.c_int),
        ("alarm_raised_time", ctypes.c_ulonglong),
        ("event_name", ctypes.c_char * 256),
        ("additional_info", ctypes.c_char * 32),
        ("resv", ctypes.c_ubyte * 32),
    )


class _EventUnion(ctypes.Union):
    _fields_ = (("dms_event", DmsFaultEvent),)


class Event(ctypes.Structure):
    """``struct dcmi_event`` (360 bytes): a type tag and the fault event (the union starts at 8)."""

    _fields_ = (("type", ctypes.c_int), ("event_t", _EventUnion))


def text(raw: ctypes.Array[ctypes.c_ubyte] | bytes) -> str:
    """A fixed-size C char array as a Python string: up to the first NUL, undecodable bytes replaced."""
    data = bytes(raw)
    return data.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
