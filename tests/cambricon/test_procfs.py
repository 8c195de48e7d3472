"""The driver's procfs files: what parses, and what is malformed (with the path in the error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vendors.cambricon.classdev import slot_map
from vendors.cambricon.fake.tree import MluSpec, information_text
from vendors.cambricon.procfs import parse_information, read_core_state
from vendors.pcisysfs.files import SysfsFileError

PATH = Path("/host/proc/driver/cambricon/mlus/0000:03:00.0/information")


def test_information_as_the_driver_writes_it() -> None:
    text = information_text(MluSpec("0000:03:00.0", 5, board="MLU370-X8", serial="1916A000"))
    info = parse_information(PATH, text)
    assert info.device_name == "MLU370-X8"
    assert info.board_serial == "1916a000"
    assert info.driver_version == "v5.10.22"
    assert info.node_slot == 5
    assert info.fields["Bus Location"] == "3_0_0"
    assert info.fields["LnkSta"] == "Speed 16.0GT/s, Width x16"
    assert info.fields["PCIE Firmware Version"] == "FV/1010007"


def test_information_without_optional_lines() -> None:
    spec = MluSpec("0000:03:00.0", 0, serial=None, pcie_firmware=False)
    info = parse_information(PATH, information_text(spec, vf=True))
    assert info.device_name == "MLU370-S4-VF"
    assert info.board_serial is None
    assert "PCIE Firmware Version" not in info.fields
    assert "IPU Freq" not in info.fields


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no 'Device name:' line"),
        ("Driver Version: v5\n", "no 'Device name:' line"),
        ("Device name: MLU370-X8\ngarbage line\n", "line 2 is not 'Key: value': 'garbage line'"),
        (
            "Device name: MLU370-X8\nBoard Serial Number: SN/12 34\n",
            "Board Serial Number 'SN/12 34' is not SN/<hex>",
        ),
    ],
)
def test_malformed_information_names_the_file(text: str, reason: str) -> None:
    with pytest.raises(SysfsFileError) as err:
        parse_information(PATH, text)
    assert err.value.path == PATH
    assert str(err.value) == f"{PATH}: {reason}"


def test_zero_serial_is_no_serial() -> None:
    assert (
        parse_information(PATH, "Device name: MLU370-S4\nBoard Serial Number: SN/0000\n").board_serial is None
    )


def test_core_state(tmp_path: Path) -> None:
    directory = tmp_path / "proc/driver/cambricon/mlus/0000:03:00.0"
    directory.mkdir(parents=True)
    (directory / "core_state").write_text("CN_BOOTERR\n")
    assert read_core_state(tmp_path, "0000:03:00.0") == "CN_BOOTERR"
    (directory / "core_state").write_text("RUNNING-ish\n")
    with pytest.raises(SysfsFileError, match=r"core_state: unknown core state 'RUNNING-ish'"):
        read_core_state(tmp_path, "0000:03:00.0")
    with pytest.raises(SysfsFileError, match=r"0000:04:00.0/core_state: No such file"):
        read_core_state(tmp_path, "0000:04:00.0")


def test_slot_map_reads_kernel_style_and_absolute_device_links(tmp_path: Path) -> None:
    classes = tmp_path / "sys/class/cambricon"
    for name, target in (
        ("cambricon_dev3", "../../../0000:1a:00.0"),
        ("cambricon_dev0", "/sys/devices/pci0000:00/0000:00:01.0/0000:05:00.0"),
        ("cambricon_ctl", "../../../0000:99:00.0"),
        ("cap_dev0_mi1", "../../../0000:98:00.0"),
    ):
        (classes / name).mkdir(parents=True)
        (classes / name / "device").symlink_to(target)
    (classes / "cambricon_dev9").mkdir()  # no device link: cannot be attributed
    assert slot_map(tmp_path) == {"0000:1a:00.0": 3, "0000:05:00.0": 0}
    assert slot_map(tmp_path / "nowhere") == {}
