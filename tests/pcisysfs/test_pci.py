"""PCI functions read from a sysfs-shaped tree built by the shared fake, as real sysfs lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from vendors.pcisysfs.fake import bind_driver, remove_pci_function, unbind_driver, write_pci_function
from vendors.pcisysfs.files import SysfsFileError, parse_key_values, read_int
from vendors.pcisysfs.pci import pci_function_present, read_pci_function, scan_pci

VENDOR = 0x1D94


def test_function_attributes_driver_and_resolved_path(tmp_path: Path) -> None:
    write_pci_function(
        tmp_path,
        "0000:63:00.0",
        vendor_id=VENDOR,
        device_id=0x6210,
        numa_node=1,
        driver="hydcu",
        bridges=("0000:60:01.0", "0000:61:00.0", "0000:62:00.0"),
    )
    fn = read_pci_function(tmp_path, "0000:63:00.0")
    assert (fn.vendor_id, fn.device_id, fn.class_code, fn.numa_node) == (VENDOR, 0x6210, 0x120000, 1)
    assert fn.driver == "hydcu" and fn.physfn is None
    assert fn.device_path == "sys/devices/pci0000:60/0000:60:01.0/0000:61:00.0/0000:62:00.0/0000:63:00.0"
    assert (tmp_path / "sys/bus/pci/drivers/hydcu/0000:63:00.0").resolve() == (
        tmp_path / fn.device_path
    ).resolve()


def test_numa_minus_one_is_unknown_and_vf_names_its_parent(tmp_path: Path) -> None:
    write_pci_function(tmp_path, "0000:03:00.0", vendor_id=0xCABC, device_id=0x0370)
    write_pci_function(tmp_path, "0000:03:00.1", vendor_id=0xCABC, device_id=0x0371, physfn="0000:03:00.0")
    assert read_pci_function(tmp_path, "0000:03:00.0").numa_node is None
    assert read_pci_function(tmp_path, "0000:03:00.1").physfn == "0000:03:00.0"


def test_scan_keeps_good_functions_and_names_the_bad_file(tmp_path: Path) -> None:
    for n in range(3):
        write_pci_function(
            tmp_path,
            f"0000:{0x10 + n:02x}:00.0",
            vendor_id=VENDOR,
            device_id=0x6210,
            bridges=("0000:00:01.0",),
        )
    write_pci_function(tmp_path, "0000:20:00.0", vendor_id=0x10DE, device_id=0x2330)
    bad = tmp_path / "sys/bus/pci/devices/0000:11:00.0/numa_node"
    bad.write_text("zero\n")
    scan = scan_pci(tmp_path, VENDOR)
    assert [f.address for f in scan.functions] == ["0000:10:00.0", "0000:12:00.0"]
    assert list(scan.errors) == ["0000:11:00.0"]
    error = scan.errors["0000:11:00.0"]
    assert error.path == bad and "not an integer: 'zero'" in str(error) and str(bad) in str(error)


def test_scan_of_a_host_without_pci_bus_is_empty(tmp_path: Path) -> None:
    scan = scan_pci(tmp_path, VENDOR)
    assert scan.functions == () and dict(scan.errors) == {}


def test_unbind_bind_and_hot_removal(tmp_path: Path) -> None:
    write_pci_function(tmp_path, "0000:63:00.0", vendor_id=VENDOR, device_id=0x6210, driver="hydcu")
    unbind_driver(tmp_path, "0000:63:00.0")
    assert read_pci_function(tmp_path, "0000:63:00.0").driver is None
    assert not (tmp_path / "sys/bus/pci/drivers/hydcu/0000:63:00.0").exists()
    bind_driver(tmp_path, "0000:63:00.0", "hycu")
    assert read_pci_function(tmp_path, "0000:63:00.0").driver == "hycu"
    remove_pci_function(tmp_path, "0000:63:00.0")
    assert not pci_function_present(tmp_path, "0000:63:00.0")
    with pytest.raises(SysfsFileError, match="PCI function not present"):
        read_pci_function(tmp_path, "0000:63:00.0")
    assert scan_pci(tmp_path, VENDOR).functions == ()


def test_read_int_and_key_values(tmp_path: Path) -> None:
    path = tmp_path / "value"
    path.write_text("0x1d94\n")
    assert read_int(path) == 0x1D94
    with pytest.raises(SysfsFileError) as caught:
        read_int(tmp_path / "missing")
    assert caught.value.path == tmp_path / "missing"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(SysfsFileError, match="not UTF-8"):
        read_int(path)
    text = "Device name: MLU370-X8\nDevice Major: 236\nDevice name: other\n\nno separator\n"
    assert parse_key_values(text, ":") == {"Device name": "MLU370-X8", "Device Major": "236"}
    assert parse_key_values("simd_count 256\ngpu_id 13261\n", " ") == {"simd_count": "256", "gpu_id": "13261"}
