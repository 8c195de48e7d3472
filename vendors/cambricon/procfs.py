"""The MLU driver's procfs files: ``/proc/driver/cambricon/mlus/<bdf>/{information,core_state}``.

The driver adds no custom sysfs attributes (cambricon.md §2.2), so everything per card beyond the PCI
ids comes from these two files: the board name, the board serial number (the only identity readable
without cndev) and the driver's per-card state machine. ``/proc`` is not sysfs: udev sends no event
when these change, which is why the health loop re-reads them on its bounded re-scan.

Both parsers raise :class:`~vendors.pcisysfs.files.SysfsFileError` naming the file, so a malformed
file marks only its own card.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from vendors.pcisysfs.files import SysfsFileError, parse_key_values, read_text

PROC_MLUS = "proc/driver/cambricon/mlus"
RUNNING = "CN_RUNNING"
CORE_STATES = frozenset(
    {
        "CN_EARLYINITED",
        "CN_BRINGUP",
        "CN_BOOTING",
        "CN_LATEINIT",
        RUNNING,
        "CN_BOOTERR",
        "CN_RESET",
        "CN_RESET_ERR",
        "CN_UNKNOWN",
    }
)
"""Every value the driver writes to ``core_state`` (``cndrv_core.h``); anything else is malformed."""

_SERIAL_PREFIX = "SN/"
_SERIAL = re.compile(r"[0-9A-Za-z]+")
_CARD_NODE = re.compile(r"/dev/cambricon_dev(\d+)")


@dataclass(frozen=True)
class MluInformation:
    """The parts of ``information`` the backend uses; ``fields`` keeps every ``Key: value`` line.

    ``board_serial`` is the hex after ``SN/``, or None when the line is missing or all zeros (a board
    whose serial was never programmed prints zeros; treating that as an identity would merge boards).
    ``node_slot`` is N of ``Device inode path: /dev/cambricon_dev<N>`` when the path has that form.
    """

    device_name: str
    board_serial: str | None = None
    driver_version: str | None = None
    node_slot: int | None = None
    fields: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))


def function_proc_dir(host_root: Path, bdf: str) -> Path:
    """The driver's per-function directory; the driver prints the BDF lower-case, as sysfs does."""
    return host_root / PROC_MLUS / bdf.lower()


def information_path(host_root: Path, bdf: str) -> Path:
    return function_proc_dir(host_root, bdf) / "information"


def core_state_path(host_root: Path, bdf: str) -> Path:
    return function_proc_dir(host_root, bdf) / "core_state"


def _serial(path: Path, value: str | None) -> str | None:
    if value is None:
        return None
    digits = value.removeprefix(_SERIAL_PREFIX).strip()
    if not digits or set(digits) <= {"0"}:
        return None
    if not _SERIAL.fullmatch(digits):
        raise SysfsFileError(path, f"Board Serial Number {value!r} is not SN/<hex>")
    return digits.lower()


def parse_information(path: Path, text: str) -> MluInformation:
    """Parse the text of ``information``; ``path`` only names the file in errors.

    Every non-blank line must be ``Key: value`` and ``Device name`` must be there (the driver always
    writes it first); anything else means the file is not what the driver writes.
    """
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and ":" not in line:
            raise SysfsFileError(path, f"line {number} is not 'Key: value': {line.strip()[:60]!r}")
    values = parse_key_values(text, ":")
    device_name = values.get("Device name")
    if not device_name:
        raise SysfsFileError(path, "no 'Device name:' line")
    node = _CARD_NODE.fullmatch(values.get("Device inode path", ""))
    return MluInformation(
        device_name=device_name,
        board_serial=_serial(path, values.get("Board Serial Number")),
        driver_version=values.get("Driver Version") or None,
        node_slot=int(node.group(1)) if node else None,
        fields=values,
    )


def read_information(host_root: Path, bdf: str) -> MluInformation:
    path = information_path(host_root, bdf)
    return parse_information(path, read_text(path))


def read_core_state(host_root: Path, bdf: str) -> str:
    """The card's driver state, one of :data:`CORE_STATES`; SysfsFileError for anything else."""
    path = core_state_path(host_root, bdf)
    state = read_text(path)
    if state not in CORE_STATES:
        raise SysfsFileError(path, f"unknown core state {state[:40]!r}")
    return state
