"""Typed wrappers over the DCMI functions the backend uses: Python values in, Python values out.

Each wrapper makes exactly the C call of ascend.md §2 with the buffer sizes MindX uses, checks the
return code (:class:`~vendors.ascend.library.DcmiError` names it, §2.9) and converts the output
structs into plain values. Range checks are MindX's: card lists of at most 64, 1..4 chips per card,
error-code counts 0..128, vNPU counts up to 32. Nothing here bounds time: callers run these on the
chip's worker (:mod:`vendors.ascend.timeouts`).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from vendors.ascend import abi
from vendors.ascend.library import DcmiError, DcmiLibrary

VERSION_BUFFER = 64
PRODUCT_TYPE_BUFFER = 64
MAX_DEVICES_PER_CARD = 4
MAX_ID = 256


def _invalid(call: str, detail: str) -> DcmiError:
    return DcmiError(abi.ERR_INVALID_PARAMETER, call, detail)


def init(lib: DcmiLibrary) -> None:
    lib.call("dcmi_init")


def _version(lib: DcmiLibrary, name: str) -> str:
    buffer = ctypes.create_string_buffer(VERSION_BUFFER)
    lib.call(name, buffer, VERSION_BUFFER)
    return abi.text(buffer.raw)


def dcmi_version(lib: DcmiLibrary) -> str:
    return _version(lib, "dcmi_get_dcmi_version")


def driver_version(lib: DcmiLibrary) -> str:
    return _version(lib, "dcmi_get_driver_version")


def card_list(lib: DcmiLibrary) -> list[int]:
    """Card ids from the V2 call, or the V1 name where only that exists (MindX dlsyms both)."""
    name = "dcmi_get_card_list" if lib.has("dcmi_get_card_list") else "dcmi_get_card_num_list"
    count = ctypes.c_int(0)
    ids = (ctypes.c_int * abi.CARD_LIST_LEN)()
    lib.call(name, ctypes.byref(count), ids, abi.CARD_LIST_LEN)
    if not 0 <= count.value <= abi.CARD_LIST_LEN:
        raise _invalid(name, f"card count {count.value} outside 0..{abi.CARD_LIST_LEN}")
    cards = list(ids[: count.value])
    if any(card < 0 for card in cards):
        raise _invalid(name, f"negative card id in {cards}")
    return cards


def device_num_in_card(lib: DcmiLibrary, card_id: int) -> int:
    num = ctypes.c_int(0)
    lib.call("dcmi_get_device_num_in_card", card_id, ctypes.byref(num))
    if not 1 <= num.value <= MAX_DEVICES_PER_CARD:
        raise _invalid(
            "dcmi_get_device_num_in_card",
            f"card {card_id}: {num.value} chips, outside 1..{MAX_DEVICES_PER_CARD}",
        )
    return num.value


def device_type(lib: DcmiLibrary, card_id: int, device_id: int) -> int:
    value = ctypes.c_int(abi.INVALID_TYPE)
    lib.call("dcmi_get_device_type", card_id, device_id, ctypes.byref(value))
    return value.value


def logic_id(lib: DcmiLibrary, card_id: int, device_id: int) -> int:
    value = ctypes.c_int(-1)
    lib.call("dcmi_get_device_logic_id", ctypes.byref(value), card_id, device_id)  # output first
    if not 0 <= value.value < MAX_ID:
        raise _invalid("dcmi_get_device_logic_id", f"logic id {value.value} outside 0..{MAX_ID - 1}")
    return value.value


def phy_id(lib: DcmiLibrary, logic: int) -> int:
    value = ctypes.c_uint(MAX_ID)
    lib.call("dcmi_get_device_phyid_from_logicid", logic, ctypes.byref(value))
    if not 0 <= value.value < MAX_ID:
        raise _invalid("dcmi_get_device_phyid_from_logicid", f"phy id {value.value} outside 0..{MAX_ID - 1}")
    return value.value


def health(lib: DcmiLibrary, card_id: int, device_id: int) -> int:
    """The raw health value: 0 OK, 1 minor, 2 major, 3 critical, 0xFFFFFFFF absent, other unknown."""
    value = ctypes.c_uint(abi.HEALTH_ABSENT)
    lib.call("dcmi_get_device_health", card_id, device_id, ctypes.byref(value))
    return value.value


def error_codes(lib: DcmiLibrary, card_id: int, device_id: int) -> list[int]:
    """Active fault codes (MindX passes 128 and keeps the nonzero entries)."""
    count = ctypes.c_int(0)
    codes = (ctypes.c_uint * abi.ERROR_CODE_LIST_LEN)()
    lib.call(
        "dcmi_get_device_errorcode_v2",
        card_id,
        device_id,
        ctypes.byref(count),
        codes,
        abi.ERROR_CODE_LIST_LEN,
    )
    if not 0 <= count.value <= abi.ERROR_CODE_LIST_LEN:
        raise _invalid("dcmi_get_device_errorcode_v2", f"error count {count.value} outside 0..128")
    return [code for code in codes[: count.value] if code]


@dataclass(frozen=True)
class ChipInfo:
    chip_type: str
    chip_name: str
    chip_version: str
    ai_cores: int
    npu_name: str = ""


def chip_info(lib: DcmiLibrary, card_id: int, device_id: int) -> ChipInfo:
    """Chip info through the V2 call (adds the NPU name) where the library has it, else V1."""
    if lib.has("dcmi_get_device_chip_info_v2"):
        info2 = abi.ChipInfoV2()
        try:
            lib.call("dcmi_get_device_chip_info_v2", card_id, device_id, ctypes.byref(info2))
        except DcmiError as err:
            if not err.unsupported:
                raise
        else:
            return ChipInfo(
                abi.text(info2.chip_type),
                abi.text(info2.chip_name),
                abi.text(info2.chip_ver),
                info2.aicore_cnt,
                abi.text(info2.npu_name),
            )
    info = abi.ChipInfo()
    lib.call("dcmi_get_device_chip_info", card_id, device_id, ctypes.byref(info))
    return ChipInfo(
        abi.text(info.chip_type), abi.text(info.chip_name), abi.text(info.chip_ver), info.aicore_cnt
    )


def board_id(lib: DcmiLibrary, card_id: int, device_id: int) -> int:
    info = abi.BoardInfo()
    lib.call("dcmi_get_device_board_info", card_id, device_id, ctypes.byref(info))
    return int(info.board_id)


def product_type(lib: DcmiLibrary, card_id: int, device_id: int) -> str:
    buffer = ctypes.create_string_buffer(PRODUCT_TYPE_BUFFER)
    lib.call("dcmi_get_product_type", card_id, device_id, buffer, PRODUCT_TYPE_BUFFER)
    return abi.text(buffer.raw)


def hbm_mb(lib: DcmiLibrary, card_id: int, device_id: int) -> int:
    info = abi.HbmInfo()
    lib.call("dcmi_get_device_hbm_info", card_id, device_id, ctypes.byref(info))
    return int(info.memory_size)


def ddr_mb(lib: DcmiLibrary, card_id: int, device_id: int) -> int:
    info = abi.MemoryInfoV3()
    lib.call("dcmi_get_device_memory_info_v3", card_id, device_id, ctypes.byref(info))
    return int(info.memory_size)


@dataclass(frozen=True)
class PciInfo:
    vendor_id: int
    device_id: int
    domain: int
    bus: int
    device: int
    function: int

    @property
    def mindx_address(self) -> str:
        """``%04X:%02X:%02X.%X`` as MindX prints it."""
        return f"{self.domain:04X}:{self.bus:02X}:{self.device:02X}.{self.function:X}"

    @property
    def address(self) -> str:
        """The sysfs form pools and other backends use: lower case."""
        return self.mindx_address.lower()


def pcie_info(lib: DcmiLibrary, card_id: int, device_id: int) -> PciInfo:
    info = abi.PcieInfoAll()
    lib.call("dcmi_get_device_pcie_info_v2", card_id, device_id, ctypes.byref(info))
    if info.domain < 0:
        raise _invalid("dcmi_get_device_pcie_info_v2", f"negative PCI domain {info.domain}")
    return PciInfo(
        info.venderid, info.deviceid, info.domain, info.bdf_busid, info.bdf_deviceid, info.bdf_funcid
    )


def die_id(lib: DcmiLibrary, card_id: int, device_id: int, die_type: int = abi.VDIE) -> str:
    """Five ``%08X`` words joined by ``-`` (MindX's format; HAMi uses the VDIE string as the UUID)."""
    die = abi.DieId()
    lib.call("dcmi_get_device_die_v2", card_id, device_id, die_type, ctypes.byref(die))
    words = list(die.soc_die)
    if not any(words):
        raise DcmiError(abi.ERR_NOT_SUPPORT, "dcmi_get_device_die_v2", "all-zero die id")
    return "-".join(f"{word:08X}" for word in words)


def topo_type(lib: DcmiLibrary, a: tuple[int, int], b: tuple[int, int]) -> int:
    value = ctypes.c_int(-1)
    lib.call("dcmi_get_topo_info_by_device_id", a[0], a[1], b[0], b[1], ctypes.byref(value))
    return value.value


@dataclass(frozen=True)
class VnpuInfo:
    """One vNPU as VDEV_MNG/GET_VDEV_RESOURCE describes it."""

    vdev_id: int
    template: str
    status: int
    in_use: bool
    vfg_id: int
    ai_cores: float
    memory_mb: int


def _device_info(
    lib: DcmiLibrary, card_id: int, device_id: int, sub_cmd: int, buffer: ctypes.Structure
) -> None:
    size = ctypes.c_uint(ctypes.sizeof(buffer))
    lib.call(
        "dcmi_get_device_info",
        card_id,
        device_id,
        abi.MAIN_CMD_VDEV_MNG,
        sub_cmd,
        ctypes.byref(buffer),
        ctypes.byref(size),
    )


def vnpu_ids(lib: DcmiLibrary, card_id: int, device_id: int) -> list[int]:
    """The vNPU ids of a chip (VDEV_MNG/GET_TOTAL_RESOURCE); MindX rejects more than 32."""
    total = abi.SocTotalResource()
    _device_info(lib, card_id, device_id, abi.VMNG_SUB_CMD_GET_TOTAL_RESOURCE, total)
    if total.vdev_num > abi.MAX_VDEV_NUM:
        raise _invalid("dcmi_get_device_info", f"vdev_num {total.vdev_num} above {abi.MAX_VDEV_NUM}")
    return list(total.vdev_id[: total.vdev_num])


def vnpu_info(lib: DcmiLibrary, card_id: int, device_id: int, vdev_id: int) -> VnpuInfo:
    query = abi.VdevQuery()
    query.vdev_id = vdev_id
    _device_info(lib, card_id, device_id, abi.VMNG_SUB_CMD_GET_VDEV_RESOURCE, query)
    info = query.query_info
    return VnpuInfo(
        vdev_id=vdev_id,
        template=abi.text(info.name),
        status=info.status,
        in_use=bool(info.is_container_used),
        vfg_id=info.vfg_id,
        ai_cores=float(info.computing.aic),
        memory_mb=int(info.computing.memory_size),
    )


def free_resources(lib: DcmiLibrary, card_id: int, device_id: int) -> tuple[float, int]:
    """(AI cores, memory MB) not yet given to a vNPU (VDEV_MNG/GET_FREE_RESOURCE)."""
    free = abi.SocFreeResource()
    _device_info(lib, card_id, device_id, abi.VMNG_SUB_CMD_GET_FREE_RESOURCE, free)
    return float(free.computing.aic), int(free.computing.memory_size)


def create_vnpu(lib: DcmiLibrary, card_id: int, device_id: int, template: str) -> int:
    """Create one vNPU of ``template``, letting the driver choose its ids; returns the vdev id."""
    request = abi.CreateVdevRes()
    request.vdev_id = abi.VDEV_ID_ANY
    request.vfg_id = abi.VDEV_ID_ANY
    request.template_name = template.encode()
    out = abi.CreateVdevOut()
    lib.call("dcmi_create_vdevice", card_id, device_id, ctypes.byref(request), ctypes.byref(out))
    return int(out.vdev_id)


def destroy_vnpu(lib: DcmiLibrary, card_id: int, device_id: int, vdev_id: int) -> None:
    lib.call("dcmi_set_destroy_vdevice", card_id, device_id, vdev_id)
