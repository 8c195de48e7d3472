"""Health both ways on the bounded re-scan: hot-removal, unbind, core_state, malformed files, hot-add.

The fake tree is changed as the kernel would change it; the backend's health stream (udev off, 50 ms
re-scan) must report the change for that card only, with the reason naming the cause, and report the
card Healthy again when it comes back, under the same id.
"""

from __future__ import annotations

from dataclasses import replace

from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged, Unit
from tests.cambricon.conftest import Harness, healths
from vendors.cambricon.fake.tree import MluSpec, mlulink_node, pcie_node
from vendors.cambricon.health import CardChecker
from vendors.cambricon.probe import card_node

CHIP = "0000:22:00.0"
CHIP_ID = "MLU-1916a001-0"


def others_quiet(stream_seen: list[HealthEvent | InventoryChanged], card_id: str) -> bool:
    return all(e.device_id == card_id for e in stream_seen if isinstance(e, HealthEvent))


def test_hot_removal_and_return(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node)
    before = backend.discover()
    stream = mlu.watch(backend)

    node.remove(CHIP)
    down = stream.wait_for(CHIP_ID, Health.UNHEALTHY)
    assert down.reason == f"PCI function {CHIP} removed"
    during = backend.discover()
    gone = during.card(CHIP_ID)
    assert gone is not None and gone.health == Health.UNHEALTHY, "a removed card stays, Unhealthy"
    assert (gone.index, gone.pci_address, gone.attributes["linkModule"]) == (2, CHIP, "1916a001")
    assert [c.id for c in during.cards] == [c.id for c in before.cards]

    node.restore(CHIP)
    up = stream.wait_for(CHIP_ID, Health.HEALTHY)
    assert CHIP in up.reason
    stream.wait_inventory_changed()  # discovered while it was gone: its nodes are looked up again
    assert healths(backend) == {c.id: Health.HEALTHY for c in before.cards}
    assert "/dev/cambricon_ipcm2" in [d.host_path for d in backend.container_edits([unit(CHIP_ID)]).devices]
    assert others_quiet(stream.seen, CHIP_ID)


def test_driver_unbind_and_rebind(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node)
    backend.discover()
    stream = mlu.watch(backend)

    node.unbind(CHIP)
    assert stream.wait_for(CHIP_ID, Health.UNHEALTHY).reason == f"PCI function {CHIP} has no driver bound"
    assert not (node.host_root / "sys/class/cambricon/cambricon_dev2").exists()
    node.rebind(CHIP)
    stream.wait_for(CHIP_ID, Health.HEALTHY)
    assert others_quiet(stream.seen, CHIP_ID)
    assert not any(isinstance(e, InventoryChanged) for e in stream.seen), "same slot: nothing to rediscover"


def test_rebind_under_another_slot_rediscovers_the_edits(mlu: Harness) -> None:
    node = mlu.node(pcie_node(2))
    backend = mlu.backend(node)
    card_id = backend.discover().cards[1].id
    stream = mlu.watch(backend)
    node.unbind("0000:04:00.0")
    stream.wait_for(card_id, Health.UNHEALTHY)
    node.rebind("0000:04:00.0", slot=5)
    stream.wait_inventory_changed()
    card = backend.discover().card(card_id)
    assert card is not None and card.index == 5 and card.health == Health.HEALTHY
    edits = backend.container_edits([unit(card_id)])
    assert edits.env["CAMBRICON_VISIBLE_DEVICES"] == "5"
    assert edits.devices[0].host_path == card_node(5)


def test_core_state_fault_and_recovery(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node)
    backend.discover()
    stream = mlu.watch(backend)

    node.set_core_state(CHIP, "CN_BOOTERR")
    down = stream.wait_for(CHIP_ID, Health.UNHEALTHY)
    assert down.reason == f"{node.host_root}/proc/driver/cambricon/mlus/{CHIP}/core_state: CN_BOOTERR"
    node.set_core_state(CHIP, "CN_RUNNING")
    stream.wait_for(CHIP_ID, Health.HEALTHY)
    assert [e.health for e in stream.events_for(CHIP_ID)] == [Health.UNHEALTHY, Health.HEALTHY]
    assert others_quiet(stream.seen, CHIP_ID)


def test_card_booting_at_start_becomes_healthy(mlu: Harness) -> None:
    node = mlu.node(pcie_node(3, booting=(1,)))
    backend = mlu.backend(node)
    cards = backend.discover().cards
    assert cards[1].health == Health.UNHEALTHY
    stream = mlu.watch(backend)
    node.set_core_state("0000:04:00.0", "CN_RUNNING")
    stream.wait_for(cards[1].id, Health.HEALTHY)
    stream.wait_inventory_changed()
    assert set(healths(backend).values()) == {Health.HEALTHY}


def test_malformed_information_marks_only_that_card(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node)
    backend.discover()
    stream = mlu.watch(backend)

    path = node.corrupt(
        f"proc/driver/cambricon/mlus/{CHIP}/information", "Device name: MLU370-X8\n\x01\x02 junk\n"
    )
    down = stream.wait_for(CHIP_ID, Health.UNHEALTHY)
    assert down.reason == f"{path}: line 2 is not 'Key: value': '\\x01\\x02 junk'"
    inventory = backend.discover()
    card = inventory.card(CHIP_ID)
    assert card is not None and card.health == Health.UNHEALTHY
    assert str(path) in card.attributes["healthReason"]
    assert (card.model, card.attributes["linkModule"]) == ("MLU370-X8", "1916a001"), "kept from before"
    assert [c.id for c in inventory.cards if c.health != Health.HEALTHY] == [CHIP_ID]

    node.repair_information(CHIP)
    stream.wait_for(CHIP_ID, Health.HEALTHY)
    assert others_quiet(stream.seen, CHIP_ID)


def test_information_that_is_not_text(mlu: Harness) -> None:
    node = mlu.node(pcie_node(2))
    backend = mlu.backend(node)
    cards = backend.discover().cards
    stream = mlu.watch(backend)
    path = node.corrupt("proc/driver/cambricon/mlus/0000:02:00.0/information", b"\xff\xfe\x00garbage")
    assert stream.wait_for(cards[0].id, Health.UNHEALTHY).reason == f"{path}: not UTF-8 text"
    assert others_quiet(stream.seen, cards[0].id)


def test_malformed_numa_node_marks_only_that_card(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node)
    backend.discover()
    stream = mlu.watch(backend)

    path = node.corrupt(f"sys/bus/pci/devices/{CHIP}/numa_node", "zz\n")
    down = stream.wait_for(CHIP_ID, Health.UNHEALTHY)
    assert down.reason == f"{path}: not an integer: 'zz'"
    inventory = backend.discover()
    card = inventory.card(CHIP_ID)
    assert card is not None and card.health == Health.UNHEALTHY and card.numa_node == 0
    assert card.attributes["healthReason"] == down.reason
    assert [c.id for c in inventory.cards if c.health != Health.HEALTHY] == [CHIP_ID]

    node.corrupt(f"sys/bus/pci/devices/{CHIP}/numa_node", "0\n")
    stream.wait_for(CHIP_ID, Health.HEALTHY)
    assert others_quiet(stream.seen, CHIP_ID)


def test_malformed_numa_node_at_first_discovery(mlu: Harness) -> None:
    node = mlu.node(pcie_node(3))
    path = node.corrupt("sys/bus/pci/devices/0000:04:00.0/numa_node", "-x\n")
    cards = mlu.backend(node).discover().cards
    assert [c.health for c in cards] == [Health.HEALTHY, Health.UNHEALTHY, Health.HEALTHY]
    assert cards[1].id == "MLU-3700b001", "the serial still names it"
    assert cards[1].attributes["healthReason"] == f"{path}: not an integer: '-x'"


def test_new_card_asks_for_discovery(mlu: Harness) -> None:
    node = mlu.node(pcie_node(2))
    backend = mlu.backend(node)
    backend.discover()
    stream = mlu.watch(backend)
    node.add(MluSpec("0000:40:00.0", 2, serial="feed01", numa_node=1, bridges=("0000:00:1f.0",)))
    changed = stream.wait_inventory_changed()
    assert "new MLU function 0000:40:00.0" in changed.reason
    card = backend.discover().card("MLU-feed01")
    assert card is not None and card.health == Health.HEALTHY and card.index == 2
    assert backend.container_edits([unit("MLU-feed01")]).env["CAMBRICON_VISIBLE_DEVICES"] == "2"


def test_a_card_hot_added_mid_probe_ends_healthy(mlu: Harness) -> None:
    """The rediscovery a new MLU starts lands before its driver has bound; the binding that follows
    must bring another rediscovery (the shared stream announces each new fact), or the card stays
    Unhealthy under its provisional id."""
    node = mlu.node(pcie_node(2))
    backend = mlu.backend(node)
    backend.discover()
    stream = mlu.step(backend)
    newcomer = MluSpec(
        "0000:40:00.0", 2, serial="feed01", numa_node=1, bridges=("0000:00:1f.0",), driver=None
    )

    node.add(newcomer)
    first = stream.next()
    assert isinstance(first, InventoryChanged) and "new MLU function 0000:40:00.0" in first.reason
    half = {c.pci_address: c for c in backend.discover().cards}[newcomer.bdf]
    assert half.health == Health.UNHEALTHY

    node.rebind(newcomer.bdf)  # the probe ends before the stream's next look
    again = stream.next_inventory_changed()
    assert "new MLU function" not in again.reason
    card = backend.discover().card("MLU-feed01")
    assert card is not None and card.health == Health.HEALTHY and card.index == 2
    stream.next_for("MLU-feed01", Health.HEALTHY)
    assert backend.container_edits([unit("MLU-feed01")]).env["CAMBRICON_VISIBLE_DEVICES"] == "2"


def test_checker_reports_nothing_new_on_a_steady_node(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node)
    backend.discover()
    snapshot = backend._current()
    checker = CardChecker(node.host_root, lambda: (snapshot.known, snapshot.unhealthy_at_discovery))
    assert set(checker.check().values()) == {
        (Health.HEALTHY, f"PCI function {b} is CN_RUNNING") for b in node.bdfs
    }
    assert checker.new_cards() == frozenset()
    node.add(MluSpec("0000:40:00.0", 9, serial="feed02"))
    checker.check()
    assert checker.new_cards() == {"new MLU function 0000:40:00.0"}


def unit(card_id: str) -> Unit:
    return Unit(card_id, card_id, "cambricon")


def test_card_named_by_pci_address_takes_its_serial_id_once_readable(mlu: Harness) -> None:
    node = mlu.node(pcie_node(2))
    node.corrupt("proc/driver/cambricon/mlus/0000:04:00.0/information", "not the driver's text\n")
    backend = mlu.backend(node)
    assert [c.id for c in backend.discover().cards] == ["MLU-3700b000", "MLU-pci-0000:04:00.0"]
    stream = mlu.watch(backend)
    node.repair_information("0000:04:00.0")
    stream.wait_inventory_changed()
    cards = backend.discover().cards
    assert [(c.id, c.health) for c in cards] == [
        ("MLU-3700b000", Health.HEALTHY),
        ("MLU-3700b001", Health.HEALTHY),
    ]


def test_udev_auto_on_a_test_tree_falls_back_to_the_rescan(mlu: Harness) -> None:
    node = mlu.node(pcie_node(2))
    backend = mlu.backend(node, udev="auto")
    cards = backend.discover().cards
    stream = mlu.watch(backend)
    node.unbind("0000:02:00.0")
    assert (
        stream.wait_for(cards[0].id, Health.UNHEALTHY).reason
        == "PCI function 0000:02:00.0 has no driver bound"
    )


def test_chip_missing_at_start_takes_its_boards_free_ordinal(mlu: Harness) -> None:
    spec = mlulink_node(2)
    first, second = spec.cards
    node = mlu.node(replace(spec, cards=(replace(first, driver=None), second)))
    backend = mlu.backend(node)
    assert [c.id for c in backend.discover().cards] == ["MLU-1916a000-0", "MLU-pci-0000:12:00.0"]
    stream = mlu.watch(backend)
    node.rebind(first.bdf)
    stream.wait_inventory_changed()
    cards = {c.pci_address: c for c in backend.discover().cards}
    assert (cards[first.bdf].id, cards[second.bdf].id) == ("MLU-1916a000-1", "MLU-1916a000-0")
    assert {c.attributes["linkModule"] for c in cards.values()} == {"1916a000"}
    assert len(backend.discover().cards) == 2


def test_ids_given_for_a_shared_serial_are_final(mlu: Harness) -> None:
    spec = pcie_node(2)
    node = mlu.node(replace(spec, cards=tuple(replace(c, serial="abc123") for c in spec.cards)))
    backend = mlu.backend(node)
    backend.discover()
    snapshot = backend._current()
    checker = CardChecker(node.host_root, lambda: (snapshot.known, snapshot.unhealthy_at_discovery))
    assert set(checker.check()) == {"MLU-pci-0000:02:00.0", "MLU-pci-0000:04:00.0"}
    assert checker.new_cards() == frozenset(), "re-discovering would give the same ids: nothing to ask for"
