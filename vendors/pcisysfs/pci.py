"""PCI functions as sysfs shows them: ``/sys/bus/pci/devices/<domain:bus:dev.fn>/``.

Every sysfs-driven vendor starts here: find the functions carrying its PCI vendor id, then read
identity, NUMA node, driver binding and SR-IOV parentage. The resolved device path (the real
directory under ``/sys/devices``) is kept because it encodes the PCIe tree the host-path links need.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from vendors.pcisysfs.files import SysfsFileError, read_int, read_optional_text, read_text

PCI_DEVICES = "sys/bus/pci/devices"


@dataclass(frozen=True)
class PciFunction:
    """One PCI function. ``numa_node`` is None when sysfs says ``-1`` (unknown) or has no file."""

    address: str
    vendor_id: int
    device_id: int
    class_code: int = 0
    numa_node: int | None = None
    driver: str | None = None
    physfn: str | None = None
    device_path: str = ""


def function_dir(host_root: Path, address: str) -> Path:
    return host_root / PCI_DEVICES / address


def pci_function_present(host_root: Path, address: str) -> bool:
    """Whether the function's sysfs directory exists (it vanishes on hot-removal)."""
    return function_dir(host_root, address).is_dir()


def _link_name(path: Path) -> str | None:
    """Basename of a symlink's target, or None when there is no such link."""
    if not path.is_symlink():
        return None
    return os.path.basename(os.readlink(path))


def _numa_node(path: Path) -> int | None:
    if read_optional_text(path) is None:
        return None
    value = read_int(path, 10)
    return None if value < 0 else value


def _device_path(host_root: Path, address: str) -> str:
    resolved = Path(os.path.realpath(function_dir(host_root, address)))
    try:
        return str(resolved.relative_to(Path(os.path.realpath(host_root))))
    except ValueError:
        return f"{PCI_DEVICES}/{address}"


def read_pci_function(host_root: Path, address: str) -> PciFunction:
    """Read one function; :class:`SysfsFileError` names the first file that is missing or malformed."""
    directory = function_dir(host_root, address)
    if not directory.is_dir():
        raise SysfsFileError(directory, "PCI function not present")
    class_text = read_optional_text(directory / "class")
    return PciFunction(
        address=address,
        vendor_id=read_int(directory / "vendor", 16),
        device_id=read_int(directory / "device", 16),
        class_code=read_int(directory / "class", 16) if class_text is not None else 0,
        numa_node=_numa_node(directory / "numa_node"),
        driver=_link_name(directory / "driver"),
        physfn=_link_name(directory / "physfn"),
        device_path=_device_path(host_root, address),
    )


@dataclass(frozen=True)
class PciScan:
    """The functions of one vendor, and the ones whose files could not be read (by address)."""

    functions: tuple[PciFunction, ...] = ()
    errors: Mapping[str, SysfsFileError] = field(default_factory=lambda: MappingProxyType({}))


def _vendor_matches(directory: Path, vendor_id: int) -> bool:
    try:
        return int(read_text(directory / "vendor"), 16) == vendor_id
    except (SysfsFileError, ValueError):
        return False


def scan_pci(host_root: Path, vendor_id: int) -> PciScan:
    """Every function whose ``vendor`` file is ``vendor_id``; one bad function does not hide the rest.

    A function whose ``vendor`` file is itself unreadable cannot be attributed to any vendor and is
    skipped; one whose other files are malformed is reported in ``errors``.
    """
    bus = host_root / PCI_DEVICES
    if not bus.is_dir():
        return PciScan()
    functions: list[PciFunction] = []
    errors: dict[str, SysfsFileError] = {}
    for entry in sorted(bus.iterdir(), key=lambda p: p.name):
        if not _vendor_matches(entry, vendor_id):
            continue
        try:
            functions.append(read_pci_function(host_root, entry.name))
        except SysfsFileError as exc:
            errors[entry.name] = exc
    return PciScan(tuple(functions), MappingProxyType(errors))
