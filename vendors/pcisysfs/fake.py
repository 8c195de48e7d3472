"""Builds PCI functions in a fake host root exactly as sysfs lays them out, for tests and benches.

Real sysfs keeps each function's directory under ``/sys/devices/pci<domain>:<bus>/<bridges>/`` and
reaches it through relative symlinks (``/sys/bus/pci/devices/<bdf>``, ``driver``, ``physfn``,
``/sys/bus/pci/drivers/<name>/<bdf>``); the backends resolve those links, so the fake makes the
same ones. Bridges get their own entries (Intel root ports, PLX switch ports) so that a vendor scan
has something to skip, as on a real host.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from vendors.pcisysfs.pci import PCI_DEVICES

PCI_DRIVERS = "sys/bus/pci/drivers"
BRIDGE_CLASS = 0x060400
_ROOT_PORT_VENDOR = 0x8086
_SWITCH_PORT_VENDOR = 0x10B5


def _root_complex(address: str) -> str:
    domain, bus, _ = address.split(":", 2)
    return f"pci{domain}:{bus}"


def _relative_symlink(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def _write_attributes(directory: Path, vendor_id: int, device_id: int, class_code: int, numa: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vendor").write_text(f"0x{vendor_id:04x}\n")
    (directory / "device").write_text(f"0x{device_id:04x}\n")
    (directory / "class").write_text(f"0x{class_code:06x}\n")
    (directory / "numa_node").write_text(f"{numa}\n")


def write_pci_function(
    host_root: Path,
    address: str,
    *,
    vendor_id: int,
    device_id: int,
    class_code: int = 0x120000,
    numa_node: int = -1,
    driver: str | None = None,
    bridges: Sequence[str] = (),
    physfn: str | None = None,
) -> Path:
    """Create one function (and its bridges) with the standard attribute files; returns its real dir."""
    parent = host_root / "sys/devices" / _root_complex(bridges[0] if bridges else address)
    for depth, bridge in enumerate(bridges):
        parent = parent / bridge
        if not (parent / "vendor").exists():
            vendor = _ROOT_PORT_VENDOR if depth == 0 else _SWITCH_PORT_VENDOR
            _write_attributes(parent, vendor, 0x1000 + depth, BRIDGE_CLASS, numa_node)
            _relative_symlink(host_root / PCI_DEVICES / bridge, parent)
    directory = parent / address
    _write_attributes(directory, vendor_id, device_id, class_code, numa_node)
    _relative_symlink(host_root / PCI_DEVICES / address, directory)
    if physfn is not None:
        _relative_symlink(directory / "physfn", host_root / PCI_DEVICES / physfn)
    if driver is not None:
        bind_driver(host_root, address, driver)
    return directory


def _real_dir(host_root: Path, address: str) -> Path:
    return Path(os.path.realpath(host_root / PCI_DEVICES / address))


def bind_driver(host_root: Path, address: str, driver: str) -> None:
    """Bind the function to ``driver``: the function's ``driver`` link and the driver's ``<bdf>`` link."""
    directory = _real_dir(host_root, address)
    driver_dir = host_root / PCI_DRIVERS / driver
    driver_dir.mkdir(parents=True, exist_ok=True)
    _relative_symlink(directory / "driver", driver_dir)
    _relative_symlink(driver_dir / address, directory)


def unbind_driver(host_root: Path, address: str) -> None:
    """What ``echo <bdf> > .../unbind`` leaves: the function stays, both driver links go."""
    directory = _real_dir(host_root, address)
    link = directory / "driver"
    if link.is_symlink():
        (Path(os.path.realpath(link)) / address).unlink(missing_ok=True)
        link.unlink()


def remove_pci_function(host_root: Path, address: str) -> None:
    """Hot-removal: the function's directory, its bus entry and its driver entry disappear."""
    bus_entry = host_root / PCI_DEVICES / address
    if not bus_entry.is_symlink():
        return
    unbind_driver(host_root, address)
    shutil.rmtree(_real_dir(host_root, address), ignore_errors=True)
    bus_entry.unlink()
