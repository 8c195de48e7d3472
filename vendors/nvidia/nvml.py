"""Typed access to NVML through pynvml, and the one place that loads the library.

pynvml is untyped and raises a zoo of generated exception classes; every other module of this
backend calls the small typed functions here instead, and sees one exception, :class:`NvmlError`,
with the numeric ``nvmlReturn_t`` code. A symbol missing from the library (pynvml's FunctionNotFound)
is code 13, so "not supported" and "not there" are handled alike by :attr:`NvmlError.unsupported`.

pynvml keeps the library and its resolved function pointers in module globals and has no path
option (nvidia.md §1.1), so :func:`open_library` sets ``pynvml.nvmlLib`` itself; switching to another
file (tests with several fakes) clears the pointer cache, and is refused while NVML is initialised.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NewType, TypeVar

import pynvml

from hcs_deviceplugin.fieldrepr import field_repr

log = logging.getLogger(__name__)

SUCCESS = 0
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NOT_FOUND = 6
ERROR_TIMEOUT = 10
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_UNKNOWN = 999

EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8
NO_INSTANCE = 0xFFFFFFFF

GPU_INSTANCE_PROFILE_COUNT = 0x12
COMPUTE_INSTANCE_PROFILE_COUNT = 0x9
NVLINK_MAX_LINKS = 36
NVLINK_DEVICE_TYPE_GPU = 0x00
NVLINK_DEVICE_TYPE_SWITCH = 0x02

LIBRARY_NAME = "libnvidia-ml.so.1"
# Where driver packages put the library, searched under the host root after the loader's own search.
HOST_LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/aarch64-linux-gnu", "usr/lib", "lib64")

Device = NewType("Device", object)
GpuInstance = NewType("GpuInstance", object)
ComputeInstance = NewType("ComputeInstance", object)
EventSet = NewType("EventSet", object)

_T = TypeVar("_T")


class NvmlError(Exception):
    """An NVML call failed. ``code`` is the ``nvmlReturn_t`` value; 13 means the symbol is missing."""

    def __init__(self, code: int, message: str, call: str = "") -> None:
        super().__init__(f"{call}: {message}" if call else message)
        self.code = code
        self.call = call

    @property
    def unsupported(self) -> bool:
        """The library cannot do this here (NOT_SUPPORTED) or at all (symbol not exported)."""
        return self.code in (ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND)


class LibraryUnavailable(Exception):
    """No usable NVML library: not found, not loadable, or its init failed. The message says which."""


def call(name: str, *args: object) -> Any:
    """Call ``pynvml.<name>`` and turn any NVMLError into :class:`NvmlError`."""
    try:
        return getattr(pynvml, name)(*args)
    except pynvml.NVMLError as err:
        code = int(err.value)
        try:
            text = str(err)
        except Exception:  # str() may call back into a broken library
            text = f"NVML error {code}"
        raise NvmlError(code, text, name) from None


# ---------------------------------------------------------------------------------------------------
# Loading and init
# ---------------------------------------------------------------------------------------------------


class _Loaded:
    """Which library this module installed into pynvml (pynvml itself does not remember a path)."""

    lock = threading.Lock()
    path: str | None = None


def _initialised() -> bool:
    return int(getattr(pynvml, "_nvmlLib_refcount", 0)) > 0


def _install(lib: ctypes.CDLL, path: str) -> None:
    pynvml.nvmlLib = lib
    pynvml._nvmlGetFunctionPointer_cache.clear()
    _Loaded.path = path


def _load_explicit(path: str) -> str:
    if _Loaded.path == path and pynvml.nvmlLib is not None:
        return path
    if pynvml.nvmlLib is not None and _initialised():
        raise LibraryUnavailable(
            f"cannot switch to {path}: NVML library {_Loaded.path or '<loaded by pynvml>'} is initialised "
            "in this process"
        )
    if not Path(path).exists():
        raise LibraryUnavailable(f"NVML library {path} does not exist")
    try:
        lib = ctypes.CDLL(path)
    except OSError as err:
        raise LibraryUnavailable(f"cannot load NVML library {path}: {err}") from None
    _install(lib, path)
    return path


def _load_default(host_root: Path) -> str:
    if pynvml.nvmlLib is not None:
        return _Loaded.path or LIBRARY_NAME
    tried = [f"{LIBRARY_NAME} (dynamic loader search)"]
    try:
        _install(ctypes.CDLL(LIBRARY_NAME), LIBRARY_NAME)
        return LIBRARY_NAME
    except OSError:
        pass
    for directory in HOST_LIBRARY_DIRS:
        candidate = host_root / directory / LIBRARY_NAME
        tried.append(str(candidate))
        if candidate.exists():
            try:
                _install(ctypes.CDLL(str(candidate)), str(candidate))
                return str(candidate)
            except OSError as err:
                log.warning("cannot load %s: %s", candidate, err)
    raise LibraryUnavailable("NVML library not found; tried " + ", ".join(tried))


def open_library(path: str | None, host_root: Path) -> str:
    """Load NVML (``path`` if given, else the loader's search, then ``host_root`` driver dirs) and init it.

    Returns the library used. Raises :class:`LibraryUnavailable` with the reason when the library is
    missing or ``nvmlInit`` fails (driver not loaded, version mismatch, ...). Each successful call
    takes one NVML reference; release it with :func:`shutdown`.
    """
    with _Loaded.lock:
        used = _load_explicit(path) if path else _load_default(host_root)
    try:
        init()
    except NvmlError as err:
        raise LibraryUnavailable(f"nvmlInit failed with {used}: {err}") from None
    return used


def init() -> None:
    call("nvmlInit")


def shutdown() -> None:
    call("nvmlShutdown")


# ---------------------------------------------------------------------------------------------------
# System and identity
# ---------------------------------------------------------------------------------------------------


def driver_version() -> str:
    return str(call("nvmlSystemGetDriverVersion"))


def device_count() -> int:
    return int(call("nvmlDeviceGetCount"))


def handle_by_index(index: int) -> Device:
    return Device(call("nvmlDeviceGetHandleByIndex", index))


def handle_by_uuid(uuid: str) -> Device:
    return Device(call("nvmlDeviceGetHandleByUUID", uuid))


def uuid(device: Device) -> str:
    return str(call("nvmlDeviceGetUUID", device))


def name(device: Device) -> str:
    return str(call("nvmlDeviceGetName", device))


def minor_number(device: Device) -> int:
    return int(call("nvmlDeviceGetMinorNumber", device))


def index(device: Device) -> int:
    return int(call("nvmlDeviceGetIndex", device))


def memory_total(device: Device) -> int:
    return int(call("nvmlDeviceGetMemoryInfo", device).total)


def compute_capability(device: Device) -> tuple[int, int]:
    major, minor = call("nvmlDeviceGetCudaComputeCapability", device)
    return int(major), int(minor)


# Made and read within one discovery on one thread: not frozen, so a start compiles no __setattr__ or
# __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class PciInfo:
    """``nvmlPciInfo_t``: ``bus_id`` as NVML writes it (``00000000:17:00.0``), ids as packed by NVML."""

    bus_id: str
    domain: int
    bus: int
    device: int
    pci_device_id: int
    pci_subsystem_id: int

    @property
    def vendor_id(self) -> int:
        return self.pci_device_id & 0xFFFF

    @property
    def device_id(self) -> int:
        return (self.pci_device_id >> 16) & 0xFFFF


def _pci(raw: Any) -> PciInfo:
    bus_id = raw.busId.decode() if isinstance(raw.busId, bytes) else str(raw.busId)
    return PciInfo(
        bus_id=bus_id,
        domain=int(raw.domain),
        bus=int(raw.bus),
        device=int(raw.device),
        pci_device_id=int(raw.pciDeviceId),
        pci_subsystem_id=int(raw.pciSubSystemId),
    )


def pci_info(device: Device) -> PciInfo:
    return _pci(call("nvmlDeviceGetPciInfo", device))


def numa_node_id(device: Device) -> int:
    return int(call("nvmlDeviceGetNumaNodeId", device))


def memory_affinity_nodes(device: Device, words: int = 1) -> list[int]:
    """NUMA nodes whose memory is local to the card (scope NODE); may be empty."""
    raw = call("nvmlDeviceGetMemoryAffinity", device, words, 0)
    return [w * 64 + bit for w in range(words) for bit in range(64) if (int(raw[w]) >> bit) & 1]


# ---------------------------------------------------------------------------------------------------
# Topology and NVLink
# ---------------------------------------------------------------------------------------------------


def common_ancestor(a: Device, b: Device) -> int:
    return int(call("nvmlDeviceGetTopologyCommonAncestor", a, b))


def nvlink_active(device: Device, link: int) -> bool:
    return int(call("nvmlDeviceGetNvLinkState", device, link)) == 1


def nvlink_version(device: Device, link: int) -> int:
    return int(call("nvmlDeviceGetNvLinkVersion", device, link))


def nvlink_remote_pci(device: Device, link: int) -> PciInfo:
    return _pci(call("nvmlDeviceGetNvLinkRemotePciInfo", device, link))


def nvlink_remote_type(device: Device, link: int) -> int:
    return int(call("nvmlDeviceGetNvLinkRemoteDeviceType", device, link))


# ---------------------------------------------------------------------------------------------------
# MIG mode and devices (instances and profiles: vendors.nvidia.nvml_mig)
# ---------------------------------------------------------------------------------------------------


def mig_mode(device: Device) -> tuple[int, int]:
    """(current, pending) MIG mode; NOT_SUPPORTED on cards that cannot do MIG."""
    current, pending = call("nvmlDeviceGetMigMode", device)
    return int(current), int(pending)


def max_mig_device_count(device: Device) -> int:
    return int(call("nvmlDeviceGetMaxMigDeviceCount", device))


def mig_device_by_index(device: Device, slot: int) -> Device:
    return Device(call("nvmlDeviceGetMigDeviceHandleByIndex", device, slot))


def is_mig_device(device: Device) -> bool:
    # pynvml returns the c_uint itself, not an int (nvidia.md §1.3).
    return bool(call("nvmlDeviceIsMigDeviceHandle", device).value)


# ---------------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------------


# Made and read within one wait of the health monitor on its thread: not frozen, so a start
# compiles no __setattr__ or __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class EventData:
    """``nvmlEventData_t``; ``device`` is the handle's address, comparable with :func:`address`."""

    device: int
    event_type: int
    event_data: int
    gpu_instance_id: int
    compute_instance_id: int


def address(device: Device) -> int:
    """The handle's pointer value: NVML hands out one stable handle per device."""
    pointer: Any = device
    return int(ctypes.cast(pointer, ctypes.c_void_p).value or 0)


def event_set_create() -> EventSet:
    return EventSet(call("nvmlEventSetCreate"))


def supported_event_types(device: Device) -> int:
    return int(call("nvmlDeviceGetSupportedEventTypes", device))


def register_events(device: Device, mask: int, event_set: EventSet) -> None:
    call("nvmlDeviceRegisterEvents", device, mask, event_set)


def event_set_wait(event_set: EventSet, timeout_ms: int) -> EventData:
    """Next event, or NvmlError(TIMEOUT) after ``timeout_ms``. The GIL is released while it blocks."""
    raw = call("nvmlEventSetWait", event_set, timeout_ms)
    return EventData(
        device=address(Device(raw.device)),
        event_type=int(raw.eventType),
        event_data=int(raw.eventData),
        gpu_instance_id=int(raw.gpuInstanceId),
        compute_instance_id=int(raw.computeInstanceId),
    )


def event_set_free(event_set: EventSet) -> None:
    call("nvmlEventSetFree", event_set)
