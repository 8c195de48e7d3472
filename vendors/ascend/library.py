"""Finding, loading and initialising ``libdcmi.so``, one symbol at a time.

Where to look (ascend.md §1): the ``libraryPath`` option, then ``$HCS_DCMI_LIB``, then the two paths the
driver package installs (``/usr/local/Ascend/driver/lib64/driver/libdcmi.so`` and
``/usr/local/dcmi/libdcmi.so``) under ``BackendConfig.host_root``. MindX also scans ``$LD_LIBRARY_PATH``
and the ldconfig cache; we do not, since the plugin image mounts the driver at the install path and
an explicit setting covers every other layout (the facts' recommendation).

Each symbol is resolved on its own, as MindX does with ``dlsym`` per function: a symbol this driver
lacks (an older or newer DCMI) disables only the feature that needs it, and the backend records
"missing symbol X: feature Y unavailable" instead of failing to load (ccfos/huatuo#870 shows the
crash of binding everything up front). Calling a missing symbol raises :class:`DcmiError` with
MindX's code -99998. Only ``dcmi_init`` and a card-list call are indispensable.

The optional ownership check is MindX's: the file and every parent directory owned by root with no
group or other write bit. It is off by default because the fake library built in CI is not root-owned.
"""

from __future__ import annotations

import ctypes
import logging
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vendors.ascend import abi

log = logging.getLogger(__name__)

LIBRARY_ENV = "HCS_DCMI_LIB"
INSTALL_PATHS = (
    "usr/local/Ascend/driver/lib64/driver/libdcmi.so",
    "usr/local/dcmi/libdcmi.so",
)

_int_p = ctypes.POINTER(ctypes.c_int)
_uint_p = ctypes.POINTER(ctypes.c_uint)
_int, _uint = ctypes.c_int, ctypes.c_uint


@dataclass(frozen=True)
class Prototype:
    """One DCMI function: its C argument types and the feature that is lost without it."""

    name: str
    argtypes: tuple[Any, ...]
    feature: str


PROTOTYPES: tuple[Prototype, ...] = (
    Prototype("dcmi_init", (), "initialisation"),
    Prototype("dcmi_get_dcmi_version", (ctypes.c_char_p, _uint), "DCMI version report"),
    Prototype("dcmi_get_driver_version", (ctypes.c_char_p, _uint), "driver version report"),
    Prototype("dcmi_get_card_list", (_int_p, _int_p, _int), "card enumeration (V2 call)"),
    Prototype("dcmi_get_card_num_list", (_int_p, _int_p, _int), "card enumeration (V1 call)"),
    Prototype("dcmi_get_device_num_in_card", (_int, _int_p), "chip enumeration"),
    Prototype("dcmi_get_device_type", (_int, _int, _int_p), "skipping MCU/CPU devices of a card"),
    Prototype("dcmi_get_device_logic_id", (_int_p, _int, _int), "logic ids"),
    Prototype("dcmi_get_device_phyid_from_logicid", (_uint, _uint_p), "phy ids (/dev/davinciN)"),
    Prototype("dcmi_get_device_health", (_int, _int, _uint_p), "health polling"),
    Prototype(
        "dcmi_get_device_errorcode_v2", (_int, _int, _int_p, _uint_p, _uint), "fault codes in health reasons"
    ),
    Prototype(
        "dcmi_get_device_chip_info", (_int, _int, ctypes.POINTER(abi.ChipInfo)), "chip name, family, AI cores"
    ),
    Prototype("dcmi_get_device_chip_info_v2", (_int, _int, ctypes.POINTER(abi.ChipInfoV2)), "NPU name"),
    Prototype("dcmi_get_device_board_info", (_int, _int, ctypes.POINTER(abi.BoardInfo)), "A3 detection"),
    Prototype("dcmi_get_product_type", (_int, _int, ctypes.c_char_p, _int), "product type attribute"),
    Prototype(
        "dcmi_get_device_memory_info_v3", (_int, _int, ctypes.POINTER(abi.MemoryInfoV3)), "DDR memory size"
    ),
    Prototype("dcmi_get_device_hbm_info", (_int, _int, ctypes.POINTER(abi.HbmInfo)), "HBM memory size"),
    Prototype(
        "dcmi_get_device_pcie_info_v2", (_int, _int, ctypes.POINTER(abi.PcieInfoAll)), "PCI address and ids"
    ),
    Prototype(
        "dcmi_get_device_die_v2", (_int, _int, _int, ctypes.POINTER(abi.DieId)), "chip identity (VDIE id)"
    ),
    Prototype("dcmi_get_topo_info_by_device_id", (_int, _int, _int, _int, _int_p), "HCCS topology query"),
    Prototype("dcmi_get_device_info", (_int, _int, _int, _uint, ctypes.c_void_p, _uint_p), "vNPU listing"),
    Prototype(
        "dcmi_create_vdevice",
        (_int, _int, ctypes.POINTER(abi.CreateVdevRes), ctypes.POINTER(abi.CreateVdevOut)),
        "vNPU creation",
    ),
    Prototype("dcmi_set_destroy_vdevice", (_int, _int, _uint), "vNPU destruction"),
)
BY_NAME: Mapping[str, Prototype] = {p.name: p for p in PROTOTYPES}
CARD_LIST_CALLS = ("dcmi_get_card_list", "dcmi_get_card_num_list")


class DcmiError(Exception):
    """A DCMI call returned non-zero. ``code`` is the return value, ``call`` the function name."""

    def __init__(self, code: int, call: str, detail: str = "") -> None:
        text = f"{call} returned {code} ({abi.return_code_name(code)})"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.code = code
        self.call = call

    @property
    def unsupported(self) -> bool:
        """The chip cannot do this (NOT_SUPPORT) or this library has no such function."""
        return self.code in (abi.ERR_NOT_SUPPORT, abi.ERR_SYMBOL_MISSING)

    @property
    def code_name(self) -> str:
        return abi.return_code_name(self.code)


class LibraryUnavailable(Exception):
    """No usable libdcmi: not found, not loadable, not trusted, or ``dcmi_init`` failed."""


class CallObserver(Protocol):
    """Told the name of every DCMI call its thread starts and finishes (a timeout worker is one)."""

    def started(self, call: str) -> None: ...

    def finished(self) -> None: ...


_observers = threading.local()


def observe_calls(observer: CallObserver | None) -> None:
    """Make ``observer`` see every DCMI call the current thread makes from now on."""
    _observers.observer = observer


def current_observer() -> CallObserver | None:
    """The observer of the current thread's DCMI calls, if one was set."""
    found: CallObserver | None = getattr(_observers, "observer", None)
    return found


class DcmiLibrary:
    """A loaded libdcmi with each known symbol resolved separately.

    ``missing`` maps every symbol the library lacks to the feature lost with it. The object is
    thread-safe: each call goes straight to C (ctypes releases the GIL), and DCMI itself serialises
    what it must.
    """

    def __init__(self, path: str, handle: ctypes.CDLL) -> None:
        self.path = path
        self._functions: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        for proto in PROTOTYPES:
            try:
                function = getattr(handle, proto.name)
            except AttributeError:
                self.missing[proto.name] = proto.feature
                continue
            function.argtypes = list(proto.argtypes)
            function.restype = ctypes.c_int
            self._functions[proto.name] = function

    def has(self, name: str) -> bool:
        return name in self._functions

    def missing_report(self) -> list[str]:
        """One "missing symbol X: feature Y unavailable" line per symbol the library lacks."""
        return [f"missing symbol {name}: {feature} unavailable" for name, feature in self.missing.items()]

    def call(self, name: str, *args: Any) -> None:
        """Call ``name``; DcmiError for a non-zero return or a symbol this library lacks."""
        function = self._functions.get(name)
        if function is None:
            feature = self.missing.get(name) or BY_NAME[name].feature
            raise DcmiError(abi.ERR_SYMBOL_MISSING, name, f"missing symbol; {feature} unavailable")
        observer = current_observer()
        if observer is not None:
            observer.started(name)
        try:
            code = int(function(*args))
        finally:
            if observer is not None:
                observer.finished()
        if code != abi.DCMI_OK:
            raise DcmiError(code, name)


def candidates(option: str | None, environ: Mapping[str, str], host_root: Path) -> list[str]:
    """The paths to try, in order: the option, the env variable, the install paths under host_root."""
    if option:
        return [option]
    if environ.get(LIBRARY_ENV):
        return [environ[LIBRARY_ENV]]
    return [str(host_root / relative) for relative in INSTALL_PATHS]


def ownership_problem(path: str) -> str | None:
    """Why ``path`` fails MindX's check (root-owned, no group/other write, up to ``/``), or None."""
    current = Path(os.path.realpath(path))
    for entry in (current, *current.parents):
        try:
            info = entry.stat()
        except OSError as err:
            return f"cannot stat {entry}: {err}"
        if info.st_uid != 0:
            return f"{entry} is owned by uid {info.st_uid}, not root"
        if stat.S_IMODE(info.st_mode) & 0o022:
            return f"{entry} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def load(paths: Sequence[str], check_ownership: bool = False) -> DcmiLibrary:
    """Load the first of ``paths`` that exists (``dcmi_init`` is the caller's, under a time bound).

    Raises :class:`LibraryUnavailable` naming every path tried and why it failed; a path that exists
    but cannot be loaded or is untrusted stops the search (a broken driver should be reported, not
    papered over by an older copy).
    """
    tried: list[str] = []
    for path in paths:
        if not Path(path).exists():
            tried.append(f"{path} (does not exist)")
            continue
        if check_ownership:
            problem = ownership_problem(path)
            if problem is not None:
                raise LibraryUnavailable(f"libdcmi {path} fails the ownership check: {problem}")
        try:
            handle = ctypes.CDLL(path)
        except OSError as err:
            raise LibraryUnavailable(f"cannot load libdcmi {path}: {err}") from None
        library = DcmiLibrary(path, handle)
        for line in library.missing_report():
            log.warning("libdcmi %s: %s", path, line)
        if not library.has("dcmi_init"):
            raise LibraryUnavailable(f"libdcmi {path} has no dcmi_init symbol")
        if not any(library.has(name) for name in CARD_LIST_CALLS):
            raise LibraryUnavailable(f"libdcmi {path} has neither {' nor '.join(CARD_LIST_CALLS)}")
        return library
    raise LibraryUnavailable("libdcmi.so not found; tried " + ", ".join(tried))
