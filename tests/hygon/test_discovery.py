"""Discovery over generated sysfs trees: identity, models, minors, NUMA, memory, and how it degrades."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendAbsent
from hcs_deviceplugin.model import Card, Health, NotSupportedError
from tests.hygon.conftest import Harness
from vendors.hygon import HygonSettings
from vendors.hygon import attributes as attr
from vendors.hygon.drm import DrmMinors, class_drm_minors
from vendors.hygon.fake import HygonNodeSpec, pcie_node, xgmi_node
from vendors.hygon.fake.tree import GIB, K100_AI_VRAM
from vendors.hygon.kfd import location_bdf, read_topology
from vendors.hygon.models import parse_update_ids


def by_address(cards: tuple[Card, ...]) -> dict[str, Card]:
    return {c.pci_address: c for c in cards}


def test_eight_dcu_xgmi_node(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    cards = hygon.backend(node).discover().cards
    spec = node.spec.dcus

    assert [c.pci_address for c in cards] == [d.address for d in spec]
    assert [c.id for c in cards] == [
        f"DCU-{d.serial}" if d.serial else f"DCU-{d.unique_id:016x}" for d in spec
    ]
    assert cards[3].id == f"DCU-{spec[3].unique_id:016x}", "empty serial_number falls back to unique_id"
    assert [c.index for c in cards] == list(range(8))
    assert {(c.backend, c.vendor, c.model, c.pci_vendor_id, c.pci_device_id) for c in cards} == {
        ("hygon", "hygon", "K100_AI", 0x1D94, 0x6210)
    }
    assert [c.numa_node for c in cards] == [0, 0, 0, 0, 1, 1, 1, None], "numa_node -1 is unknown, not 0"
    assert [c.memory_bytes for c in cards] == [K100_AI_VRAM] * 5 + [64 * GIB] + [K100_AI_VRAM] * 2, (
        "KFD memory banks first; card 5 has none and falls back to mem_info_vram_total"
    )
    assert all(c.health == Health.HEALTHY for c in cards)
    first = cards[0].attributes
    assert first[attr.DRM_CARD_MINOR] == "1" and first[attr.DRM_RENDER_MINOR] == "128"
    assert [c.attributes[attr.DRM_CARD_MINOR] for c in cards] == [str(1 + i) for i in range(8)]
    assert [c.attributes[attr.DRM_RENDER_MINOR] for c in cards] == [str(128 + i) for i in range(8)]
    assert (first[attr.CU_COUNT], first[attr.GFX_TARGET], first[attr.KFD_GPU_ID]) == (
        "120",
        "gfx928",
        "13261",
    )
    assert (first[attr.DRIVER], first[attr.DRIVER_VERSION]) == ("hydcu", "6.3.8-V1.9.2")
    assert first[attr.HIVE_ID] == str(spec[0].hive_id) and spec[0].hive_id != 0
    assert first[attr.IDENTITY_SOURCE] == "serial_number"
    assert cards[3].attributes[attr.IDENTITY_SOURCE] == "unique_id"


def test_bmc_vga_and_hygon_cpu_functions_are_not_dcus(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    assert (node.host_root / "sys/class/drm/card0").exists(), "the fake has a BMC card0"
    assert (node.host_root / "sys/bus/pci/devices/0000:00:00.2/vendor").read_text().strip() == "0x1d94"
    cards = hygon.backend(node).discover().cards
    assert [c.pci_address for c in cards] == node.addresses
    assert [c.attributes[attr.DRM_CARD_MINOR] for c in cards] == ["1", "2"]


def test_minors_follow_the_pci_address_not_the_sorted_order(hygon: Harness) -> None:
    spec = pcie_node(3)
    swapped = (
        replace(spec.dcus[0], card_minor=3, render_minor=130),
        spec.dcus[1],
        replace(spec.dcus[2], card_minor=1, render_minor=128),
    )
    node = hygon.node(replace(spec, dcus=swapped))
    cards = by_address(hygon.backend(node).discover().cards)
    first, last = cards[swapped[0].address], cards[swapped[2].address]
    assert (first.attributes[attr.DRM_CARD_MINOR], first.attributes[attr.DRM_RENDER_MINOR]) == ("3", "130")
    assert (last.attributes[attr.DRM_CARD_MINOR], last.attributes[attr.DRM_RENDER_MINOR]) == ("1", "128")
    assert (last.index, cards[swapped[1].address].index, first.index) == (0, 1, 2), (
        "Card.index follows the DRM card minor, as hy-smi numbers cards"
    )


@pytest.mark.parametrize(
    ("serial", "drm_unique", "kfd_unique", "expected"),
    [
        ("TRFU340004050701", 0xABC, 0xABC, "DCU-TRFU340004050701"),
        ("", 0xABC, 0xABC, "DCU-0000000000000abc"),
        ("", 0, 0xABC, "DCU-0000000000000abc"),  # KFD's decimal unique_id printed as DRM prints it
        ("", 0, 0, "DCU-pci-{address}"),
    ],
    ids=["serial", "drm-unique-id", "kfd-unique-id", "pci-address"],
)
def test_identity_fallbacks(
    hygon: Harness, serial: str, drm_unique: int, kfd_unique: int, expected: str
) -> None:
    spec = pcie_node(1)
    dcu = replace(spec.dcus[0], serial=serial, unique_id=kfd_unique)
    node = hygon.node(replace(spec, dcus=(dcu,)))
    unique_file = node.function_dir(dcu.address) / "unique_id"
    if drm_unique:
        unique_file.write_text(f"{drm_unique:016x}\n")
    else:
        unique_file.unlink(missing_ok=True)
    card = hygon.backend(node).discover().cards[0]
    assert card.id == expected.format(address=dcu.address)


def test_memory_falls_back_to_zero_when_no_file_gives_it(hygon: Harness) -> None:
    spec = pcie_node(1)
    node = hygon.node(replace(spec, dcus=(replace(spec.dcus[0], kfd_mem_bank=False),)))
    (node.function_dir(node.addresses[0]) / "mem_info_vram_total").unlink()
    card = hygon.backend(node).discover().cards[0]
    assert card.memory_bytes == 0
    assert card.health == Health.HEALTHY, "memory size is a fact, not a health condition"


def test_amdgpu_bound_dcus_without_hygon_modules(hygon: Harness) -> None:
    node = hygon.node(replace(pcie_node(2), driver="amdgpu"))
    cards = hygon.backend(node).discover().cards
    assert [c.attributes[attr.DRIVER] for c in cards] == ["amdgpu", "amdgpu"]
    assert all(c.health == Health.HEALTHY for c in cards)


def test_model_table_overrides_and_unknown_ids(hygon: Harness) -> None:
    spec = pcie_node(3)
    dcus = (
        spec.dcus[0],
        replace(spec.dcus[1], device_id=0x62B7),
        replace(spec.dcus[2], device_id=0x6AB0),  # not in any table: still a DCU by its class
    )
    node = hygon.node(replace(spec, dcus=dcus))
    assert [c.model for c in hygon.backend(node).discover().cards] == ["K100_AI", "K100", "unknown-6ab0"]

    update_ids = node.host_root / "opt/hyhal/bin/update_ids"
    update_ids.write_text('declare -A map\nmap["6ab0"]="BW200"\nmap["6210"]="K100 AI"\n')
    assert [c.model for c in hygon.backend(node).discover().cards] == ["K100 AI", "K100", "BW200"]
    assert [c.model for c in hygon.backend(node, {"updateIds": ""}).discover().cards][2] == "unknown-6ab0"


def test_parse_update_ids_skips_noise_and_empty_names() -> None:
    text = 'declare -A map\n# comment\nmap["62b7"]="K100"\nmap[ "6210" ] = "K100_AI"\nmap["6211"]=""\n'
    parsed = parse_update_ids(text)
    assert {k: v.name for k, v in parsed.items()} == {0x62B7: "K100", 0x6210: "K100_AI"}


def test_kfd_location_id_spells_the_bdf() -> None:
    assert location_bdf(0, 25344) == "0000:63:00.0"
    assert location_bdf(1, 0x63 << 8 | 2 << 3 | 1) == "0001:63:02.1"


def test_kfd_topology_has_cpu_nodes_first(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(4))
    topology = read_topology(node.host_root)
    assert [n.is_gpu for n in topology.nodes] == [False, False, True, True, True, True]
    assert topology.nodes[0].properties["simd_count"] == 0
    assert [n.bdf for n in topology.gpus] == node.addresses


def test_backend_absent_without_hygon_hardware(hygon: Harness, tmp_path: Path) -> None:
    with pytest.raises(BackendAbsent, match=r"no Hygon DCU .* and no hydcu/hycu module"):
        hygon.backend(tmp_path / "empty")

    cpu_only = hygon.node(HygonNodeSpec(dcus=()))
    shutil.rmtree(cpu_only.host_root / "sys/module")
    with pytest.raises(BackendAbsent):
        hygon.backend(cpu_only)  # Hygon CPU functions (vendor 0x1d94) are not DCUs


def test_module_without_cards_is_present_and_empty(hygon: Harness) -> None:
    node = hygon.node(HygonNodeSpec(dcus=()))
    assert hygon.backend(node).discover().cards == ()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rescanSecond": "1"}, "unknown hygon option"),
        ({"rescanSeconds": "0"}, "must be above 0"),
        ({"rescanSeconds": "soon"}, "must be a number"),
        ({"udev": "maybe"}, "one of auto, on, off"),
    ],
)
def test_bad_options_are_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HygonSettings.parse(options)


def test_option_defaults() -> None:
    settings = HygonSettings.parse({})
    assert (settings.rescan_seconds, settings.use_udev, settings.hyhal_path) == (5.0, None, "/opt/hyhal")
    assert settings.update_ids == "/opt/hyhal/bin/update_ids"
    assert HygonSettings.parse({"udev": "off", "hyhalPath": ""}).update_ids == ""


def test_partition_is_not_supported(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(pcie_node(1)))
    card = backend.discover().cards[0]
    with pytest.raises(NotSupportedError, match="libhydmi"):
        backend.partition(card, "vdcu", 4)


def test_malformed_numa_node_marks_only_that_card(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    bad = node.addresses[2]
    path = node.corrupt(Path("sys/bus/pci/devices") / bad / "numa_node", "zz\n")
    cards = by_address(hygon.backend(node).discover().cards)

    assert len(cards) == 8
    broken = cards[bad]
    assert broken.health == Health.UNHEALTHY
    assert broken.attributes[attr.FAULT] == f"{path}: not an integer: 'zz'"
    assert broken.id == f"DCU-{node.dcu(bad).serial}", "identity still read from the files that are fine"
    assert broken.model == "K100_AI"
    assert all(c.health == Health.HEALTHY for a, c in cards.items() if a != bad)


def test_malformed_kfd_properties_marks_only_that_card(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    bad = node.addresses[4]
    props = node.kfd_node_dir(bad) / "properties"
    text = props.read_text().replace("simd_count 480", "simd_count lots")
    path = node.corrupt(props, text)
    cards = by_address(hygon.backend(node).discover().cards)

    assert cards[bad].health == Health.UNHEALTHY
    assert cards[bad].attributes[attr.FAULT] == f"{path}: simd_count: not an integer: 'lots'"
    assert all(c.health == Health.HEALTHY for a, c in cards.items() if a != bad)


def test_unreadable_kfd_properties_is_named_on_the_card_without_a_node(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(4))
    bad = node.addresses[1]
    props = node.kfd_node_dir(bad) / "properties"
    props.write_bytes(b"\xff\xfe\x00garbage")
    cards = by_address(hygon.backend(node).discover().cards)

    fault = cards[bad].attributes[attr.FAULT]
    assert f"no KFD topology node for {bad}" in fault
    assert f"{props}: not UTF-8 text" in fault
    assert all(c.health == Health.HEALTHY for a, c in cards.items() if a != bad)


def test_class_drm_links_resolve_to_addresses(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    found = class_drm_minors(node.host_root)
    assert found["0000:00:1e.0"] == DrmMinors(0, None), "the BMC's card0; its connector is not a minor"
    assert [found[a] for a in node.addresses] == [DrmMinors(1, 128), DrmMinors(2, 129)]


def test_minors_from_class_drm_when_the_function_has_no_drm_dir(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    address = node.addresses[1]
    drm_dir = node.function_dir(address) / "drm"
    moved = node.host_root / "elsewhere"
    drm_dir.rename(moved)  # the class links now point into a directory outside the function
    for name in ("card2", "renderD129"):
        link = node.host_root / "sys/class/drm" / name
        link.unlink()
        link.symlink_to(moved / name)
        (moved / name / "device").unlink()
        (moved / name / "device").symlink_to(node.function_dir(address))
    card = hygon.backend(node).discover().cards[1]
    assert (card.attributes[attr.DRM_CARD_MINOR], card.attributes[attr.DRM_RENDER_MINOR]) == ("2", "129")
    assert card.health == Health.HEALTHY
