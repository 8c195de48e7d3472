"""Discovery from generated MLU hosts: which functions are cards, their ids, slots, models and health."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig
from hcs_deviceplugin.model import Health, NotSupportedError
from tests.cambricon.conftest import Harness
from vendors.cambricon import create_backend
from vendors.cambricon.fake.tree import MluSpec, NodeSpec, mlulink_node, pcie_node

GIB = 1 << 30
X8_IDS = [f"MLU-1916a00{board}-{chip}" for board in range(4) for chip in range(2)]


def test_eight_mlu370_x8_chips_on_four_boards(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    cards = mlu.backend(node).discover().cards

    assert [c.id for c in cards] == [*X8_IDS[:6], "MLU-1916a003-1", "MLU-1916a003-0"]
    assert all(c.health == Health.HEALTHY for c in cards), [c.attributes.get("healthReason") for c in cards]
    assert [c.index for c in cards] == list(range(8))
    assert {c.model for c in cards} == {"MLU370-X8"}
    assert {(c.backend, c.vendor, c.pci_vendor_id, c.pci_device_id) for c in cards} == {
        ("cambricon", "cambricon", 0xCABC, 0x0370)
    }
    assert [c.numa_node for c in cards] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {c.memory_bytes for c in cards} == {24 * GIB}
    by_id = {c.id: c for c in cards}
    assert by_id["MLU-1916a001-1"].attributes["linkModule"] == "1916a001"
    assert by_id["MLU-1916a001-1"].attributes["devicePath"] == "/dev/cambricon_dev3"
    assert by_id["MLU-1916a000-0"].attributes["driver"] == "cambricon-pci-drv_mlu370_pigeon"


def test_slot_comes_from_the_class_device_not_bdf_order(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    cards = {c.pci_address: c for c in mlu.backend(node).discover().cards}
    # The last board's chips are numbered against BDF order: a2 is cambricon_dev7, a3 cambricon_dev6.
    assert (cards["0000:a2:00.0"].index, cards["0000:a3:00.0"].index) == (7, 6)
    assert cards["0000:a2:00.0"].id == "MLU-1916a003-0", "the ordinal follows BDF order, not N"
    assert cards["0000:a2:00.0"].attributes["devicePath"] == "/dev/cambricon_dev7"


def test_sr_iov_vf_and_other_vendors_are_skipped(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    assert (node.host_root / "sys/bus/pci/devices/0000:12:00.1/physfn").is_symlink()
    assert (node.host_root / "proc/driver/cambricon/mlus/0000:12:00.1/information").is_file()
    addresses = {c.pci_address for c in mlu.backend(node).discover().cards}
    assert "0000:12:00.1" not in addresses
    assert "0000:00:1f.6" not in addresses
    assert len(addresses) == 8


def test_vf_without_physfn_is_a_card_as_in_a_guest(mlu: Harness) -> None:
    guest = MluSpec("0000:05:00.0", 0, board="MLU370-X4-VF", device_id=0x0371, serial="aa01")
    cards = mlu.backend(mlu.node(NodeSpec(cards=(guest,)))).discover().cards
    assert [(c.id, c.model, c.pci_device_id) for c in cards] == [("MLU-aa01", "MLU370-X4-VF", 0x0371)]
    assert cards[0].memory_bytes == 0, "a VF's share of memory is cndev-only"


def test_function_of_another_class_is_not_a_card(mlu: Harness) -> None:
    node = mlu.node(pcie_node(2))
    node.corrupt("sys/bus/pci/devices/0000:04:00.0/class", "0x0b4000\n")
    assert [c.pci_address for c in mlu.backend(node).discover().cards] == ["0000:02:00.0"]


def test_checklist_booting_card_and_information_without_pcie_firmware(mlu: Harness) -> None:
    node = mlu.node(pcie_node(3, booting=(1,)))
    text = (node.host_root / "proc/driver/cambricon/mlus/0000:02:00.0/information").read_text()
    node.corrupt(
        "proc/driver/cambricon/mlus/0000:02:00.0/information",
        "".join(line + "\n" for line in text.splitlines() if not line.startswith("PCIE Firmware")),
    )
    cards = mlu.backend(node).discover().cards
    assert [c.health for c in cards] == [Health.HEALTHY, Health.UNHEALTHY, Health.HEALTHY]
    expected = f"{node.host_root}/proc/driver/cambricon/mlus/0000:04:00.0/core_state: CN_BOOTING"
    assert cards[1].attributes["healthReason"] == expected
    assert cards[1].attributes["coreState"] == "CN_BOOTING"
    assert cards[0].id == "MLU-3700b000" and cards[0].model == "MLU370-S4"


def test_ids_for_one_chip_boards_and_without_a_serial(mlu: Harness) -> None:
    spec = pcie_node(3)
    cards_spec = list(spec.cards)
    cards_spec[1] = replace(cards_spec[1], serial=None)
    cards_spec[2] = replace(cards_spec[2], serial="00000000")  # never programmed
    cards = mlu.backend(mlu.node(replace(spec, cards=tuple(cards_spec)))).discover().cards
    assert [c.id for c in cards] == ["MLU-3700b000", "MLU-pci-0000:04:00.0", "MLU-pci-0000:06:00.0"]
    assert all(c.health == Health.HEALTHY for c in cards)
    assert "linkModule" not in cards[0].attributes


def test_a_shared_serial_on_one_chip_boards_does_not_merge_cards(mlu: Harness) -> None:
    spec = pcie_node(2)
    same = tuple(replace(c, serial="abc123") for c in spec.cards)
    cards = mlu.backend(mlu.node(replace(spec, cards=same))).discover().cards
    assert [c.id for c in cards] == ["MLU-pci-0000:02:00.0", "MLU-pci-0000:04:00.0"]
    assert all("linkModule" not in c.attributes for c in cards)


def test_unknown_board_name_falls_back_to_the_device_id_table(mlu: Harness) -> None:
    spec = NodeSpec(
        cards=(
            MluSpec("0000:05:00.0", 0, board="mlu-cambricon", device_id=0x0590, serial="b1"),
            MluSpec("0000:06:00.0", 1, board="mlu-cambricon", device_id=0x0777, serial="b2"),
        )
    )
    cards = mlu.backend(mlu.node(spec)).discover().cards
    assert [c.model for c in cards] == ["MLU590", "MLU-0x0777"]
    assert [c.memory_bytes for c in cards] == [0, 0]


def test_card_without_class_device_is_unhealthy_with_a_slot_outside_the_dev_range(mlu: Harness) -> None:
    spec = pcie_node(2)
    cards_spec = (spec.cards[0], replace(spec.cards[1], slot=None))
    node = mlu.node(replace(spec, cards=cards_spec))
    cards = mlu.backend(node).discover().cards
    assert cards[0].health == Health.HEALTHY
    assert cards[1].health == Health.UNHEALTHY
    assert cards[1].index == 1001
    assert "cambricon_dev<N> links to PCI function 0000:04:00.0" in cards[1].attributes["healthReason"]


def test_unbound_function_at_start_is_an_unhealthy_card(mlu: Harness) -> None:
    spec = pcie_node(2)
    node = mlu.node(replace(spec, cards=(spec.cards[0], replace(spec.cards[1], driver=None))))
    cards = mlu.backend(node).discover().cards
    assert [c.health for c in cards] == [Health.HEALTHY, Health.UNHEALTHY]
    assert cards[1].id == "MLU-pci-0000:04:00.0"
    assert cards[1].attributes["healthReason"] == "PCI function 0000:04:00.0 has no driver bound"


def test_mim_capability_nodes_are_not_cards(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(2))
    assert (node.host_root / "sys/class/cambricon/cap_dev0_mi1").is_symlink()
    assert (node.host_root / "sys/class/cambricon/cambricon_ctl").is_symlink()
    assert [c.index for c in mlu.backend(node).discover().cards] == [0, 1]


def test_sixty_four_cards(mlu: Harness) -> None:
    cards = mlu.backend(mlu.node(pcie_node(64))).discover().cards
    assert len(cards) == 64
    assert len({c.id for c in cards}) == 64
    assert [c.index for c in cards] == list(range(64))
    assert all(c.health == Health.HEALTHY for c in cards)


def test_absent_without_functions_or_driver(tmp_path: Path) -> None:
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    with pytest.raises(
        BackendAbsent, match=r"no Cambricon PCI function \(vendor 0xcabc\).*cambricon_drv missing"
    ):
        create_backend(BackendConfig(host_root=tmp_path))


def test_driver_loaded_without_cards_is_present_and_empty(mlu: Harness) -> None:
    backend = mlu.backend(mlu.node(NodeSpec(cards=())))
    assert backend.discover().cards == ()


def test_cards_without_the_driver_module_are_present_and_unhealthy(mlu: Harness) -> None:
    spec = pcie_node(1)
    node = mlu.node(replace(spec, driver_module=False, cards=(replace(spec.cards[0], driver=None),)))
    cards = mlu.backend(node).discover().cards
    assert [c.health for c in cards] == [Health.UNHEALTHY]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rescanSecs": "1"}, "unknown cambricon option"),
        ({"rescanSeconds": "soon"}, "must be a number"),
        ({"rescanSeconds": "0"}, "must be above 0"),
        ({"udev": "maybe"}, "udev must be one of auto, on, off"),
    ],
)
def test_bad_options_are_errors(mlu: Harness, options: dict[str, str], message: str) -> None:
    node = mlu.node(pcie_node(1))
    with pytest.raises(ValueError, match=message):
        mlu.backend(node, **options)


def test_partition_is_not_supported(mlu: Harness) -> None:
    backend = mlu.backend(mlu.node(pcie_node(1)))
    card = backend.discover().cards[0]
    with pytest.raises(NotSupportedError, match="cndev"):
        backend.partition(card, "2m.16gb", 2)
