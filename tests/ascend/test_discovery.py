"""Discovery through the real ctypes code on the fake libdcmi: the four node kinds, ids, and sick chips."""

from __future__ import annotations

import re

from hcs_deviceplugin.model import Health, LinkKind
from tests.ascend.backend_harness import FAST, Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend.fake import node_310p_duo, node_910_a1, node_910b, node_a3

VDIE = re.compile(r"^[0-9A-F]{8}(-[0-9A-F]{8}){4}$")
GIB = 2**30


def test_910b_node_of_eight_chips(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_910b(8))).discover()
    cards = inventory.cards
    assert [c.index for c in cards] == list(range(8))
    assert all(VDIE.match(c.id) for c in cards) and len({c.id for c in cards}) == 8
    first = cards[0]
    assert (first.vendor, first.model, first.backend) == ("huawei", "Ascend910B3", "ascend")
    assert (first.pci_address, first.pci_vendor_id, first.pci_device_id) == ("0000:c1:00.0", 0x19E5, 0xD802)
    assert (first.numa_node, first.memory_bytes) == (3, 64 * GIB)
    a = first.attributes
    assert (a["cardId"], a["deviceId"], a["logicId"], a["phyId"]) == ("0", "0", "0", "0")
    assert (a["family"], a["chipName"], a["aiCores"], a["memoryKind"]) == ("Ascend910B", "910B3", "20", "hbm")
    assert a["dieId"] == first.id and a["identity"] == "vdie"
    assert a["vnpuTemplates"] == "vir05_1c_16g,vir10_3c_32g"
    assert {(c.attributes["linkGroup"], c.attributes["linkGroupSizes"]) for c in cards} == {("0", "1,2,4,8")}
    assert not any("linkModule" in c.attributes for c in cards)
    assert len(inventory.links.links) == 28, "a full HCCS mesh of 8"
    assert {link.kind for links in inventory.links.links.values() for link in links} == {LinkKind.HCCS}
    assert inventory.partitions == ()


def test_910_a1_node_has_two_rings_of_four(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_910_a1())).discover()
    cards = inventory.cards
    assert {c.attributes["family"] for c in cards} == {"Ascend910"}
    assert [c.attributes["linkGroup"] for c in cards] == ["0"] * 4 + ["1"] * 4
    assert {c.attributes["linkGroupSizes"] for c in cards} == {"1,2,4,8"}
    ids = [c.id for c in cards]
    for i in range(8):
        for j in range(i + 1, 8):
            linked = inventory.links.between(ids[i], ids[j])
            if i // 4 == j // 4:
                assert [link.kind for link in linked] == [LinkKind.HCCS], (i, j)
            else:
                assert linked == (), f"chips {i} and {j} are in different rings"
    assert [c.memory_bytes for c in cards] == [32 * GIB] * 8


def test_a3_node_has_sixteen_dies_paired_by_module(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_a3(8))).discover()
    cards = inventory.cards
    assert len(cards) == 16, "two dies per module; the MCU (device 2) is not a chip"
    assert {c.attributes["family"] for c in cards} == {"Ascend910A3"}
    assert {c.model for c in cards} == {"Ascend910_9392"}
    assert [(c.attributes["cardId"], c.attributes["deviceId"]) for c in cards[:4]] == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]
    assert [c.attributes["linkModule"] for c in cards] == [str(i // 2) for i in range(16)]
    assert {c.attributes["linkGroup"] for c in cards} == {"0"}
    assert {c.attributes["linkGroupSizes"] for c in cards} == {"1,2,4,6,8,10,12,14,16"}, "1 or even"
    ids = [c.id for c in cards]
    assert inventory.links.between(ids[0], ids[1])[0].count == 2, "SIO between the dies of a module"
    assert inventory.links.between(ids[0], ids[2])[0].kind is LinkKind.HCCS
    assert len(inventory.links.links) == 16 * 15 // 2


def test_310p_node_with_300i_duo_cards(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_310p_duo(2))).discover()
    cards = inventory.cards
    assert [(c.attributes["cardId"], c.attributes["deviceId"], c.index) for c in cards] == [
        ("1", "0", 0),
        ("1", "1", 1),
        ("2", "0", 2),
        ("2", "1", 3),
    ]
    assert {c.model for c in cards} == {"Ascend310P3"}
    assert {c.attributes["productType"] for c in cards} == {"Atlas 300I Duo"}
    assert {(c.attributes["memoryKind"], c.memory_bytes) for c in cards} == {("ddr", 24 * GIB)}
    assert [c.attributes["linkModule"] for c in cards] == ["1", "1", "2", "2"]
    assert not any("linkGroup" in c.attributes for c in cards), "310P has no HCCS"
    assert inventory.links.links == {}
    assert [c.numa_node for c in cards] == [0, 0, 1, 1]


def test_identity_is_stable_across_restarts(ascend: Harness) -> None:
    node = ascend.node(node_a3(2))
    before = [c.id for c in ascend.backend(node).discover().cards]
    after = [c.id for c in ascend.backend(node).discover().cards]
    assert before == after


def test_chip_dropped_before_first_discovery_is_left_out(ascend: Harness) -> None:
    node = ascend.node(node_910b(4))
    node.control.drop(2)
    cards = ascend.backend(node).discover().cards
    assert [c.index for c in cards] == [0, 1, 3]


def test_known_chip_that_stops_answering_is_reported_unhealthy(ascend: Harness) -> None:
    node = ascend.node(node_910b(4))
    backend = ascend.backend(node)
    before = backend.discover().cards
    node.control.drop(2)
    during = backend.discover().cards
    assert [c.id for c in during] == [c.id for c in before]
    assert [c.health for c in during] == [Health.HEALTHY, Health.HEALTHY, Health.UNHEALTHY, Health.HEALTHY]
    node.control.undrop(2)
    assert {c.health for c in backend.discover().cards} == {Health.HEALTHY}


def test_removed_card_keeps_its_chips_unhealthy_until_it_returns(ascend: Harness) -> None:
    node = ascend.node(node_310p_duo(2))
    backend = ascend.backend(node)
    before = backend.discover().cards
    node.control.remove_card(2)
    during = backend.discover().cards
    assert [c.id for c in during] == [c.id for c in before]
    assert [c.health for c in during] == [Health.HEALTHY] * 2 + [Health.UNHEALTHY] * 2
    node.control.restore_card(2)
    assert {c.health for c in backend.discover().cards} == {Health.HEALTHY}


def test_hung_chip_costs_discovery_one_timeout_and_only_that_chip(ascend: Harness) -> None:
    node = ascend.node(node_910b(4))
    backend = ascend.backend(node, FAST)
    before = backend.discover().cards
    node.control.hang(1, 30)
    during = backend.discover()
    assert [c.health for c in during.cards] == [
        Health.HEALTHY,
        Health.UNHEALTHY,
        Health.HEALTHY,
        Health.HEALTHY,
    ]
    assert [c.id for c in during.cards] == [c.id for c in before]
    node.control.hang(1, 0)


def test_unsupported_optional_facts_degrade_to_unknown(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    for call in ("dcmi_get_device_hbm_info", "dcmi_get_product_type", "dcmi_get_device_board_info"):
        node.control.not_supported(call)
    cards = ascend.backend(node).discover().cards
    assert len(cards) == 2
    assert {c.memory_bytes for c in cards} == {0}
    assert not any(k in c.attributes for c in cards for k in ("productType", "boardId", "memoryKind"))
    assert {c.attributes["family"] for c in cards} == {"Ascend910B"}


def test_dcmi_failing_entirely_keeps_the_last_inventory_unhealthy(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node)
    before = backend.discover().cards
    node.control.not_supported("dcmi_get_card_list")
    during = backend.discover().cards
    assert [(c.id, c.health) for c in during] == [(c.id, Health.UNHEALTHY) for c in before]


def test_two_chips_with_one_identity_keep_only_the_first(ascend: Harness) -> None:
    description = node_910b(3)
    description["chips"][2]["die_id"] = description["chips"][0]["die_id"]
    cards = ascend.backend(ascend.node(description)).discover().cards
    assert [c.index for c in cards] == [0, 1]
