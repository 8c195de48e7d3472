"""The kernel driver side: which modules drive DCUs, whether one is live, and its version.

Hygon ships ``hydcu`` (older/common) and ``hycu`` (newer); older DTKs may still bind DCUs to
``amdgpu`` (HAMi's copy of AMD's code globs it), so all three count. ``/sys/module/<name>/initstate``
says ``live`` once the module is loaded (dcu-dcgm polls it); anything else (``coming``, ``going``) is
the state file reporting a fault. The exact content of ``version`` is unverified (dcu-dcgm's parser
expects ``6.3.8-V1.9.2``); it is only reported, never parsed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vendors.pcisysfs.files import SysfsFileError, read_optional_text, read_text

log = logging.getLogger(__name__)

DCU_DRIVERS = ("hydcu", "hycu", "amdgpu")
HYGON_MODULES = ("hydcu", "hycu")
MODULES = "sys/module"
LIVE = "live"


def hygon_modules_present(host_root: Path) -> list[str]:
    """The Hygon-only modules loaded (``amdgpu`` alone says nothing about Hygon)."""
    return [m for m in HYGON_MODULES if (host_root / MODULES / m).is_dir()]


def driver_fault(host_root: Path, driver: str) -> str:
    """Empty when ``driver``'s module reports ``live``; otherwise why not, naming the file."""
    path = host_root / MODULES / driver / "initstate"
    if not path.exists():
        return f"{path}: module {driver} not loaded"
    try:
        state = read_text(path)
    except SysfsFileError as err:
        return str(err)
    return "" if state == LIVE else f"{path}: {state!r}, not {LIVE!r}"


def driver_version(host_root: Path, driver: str | None) -> str:
    """The module's ``version`` file, or empty when it has none (built-in, or unreadable)."""
    if driver is None:
        return ""
    try:
        return read_optional_text(host_root / MODULES / driver / "version") or ""
    except SysfsFileError as err:
        log.debug("driver version unreadable: %s", err)
        return ""
