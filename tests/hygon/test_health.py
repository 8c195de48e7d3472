"""Health both ways from the sysfs re-scan: hot-removal, unbinds, module state, malformed files, new cards.

The backend runs with ``udev=off`` and a 50 ms re-scan (conftest ``FAST``); each test changes the fake
tree and waits on the next health event with a bounded timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged, Unit
from tests.hygon.conftest import Harness
from vendors.hygon import attributes as attr
from vendors.hygon.fake import pcie_node, xgmi_node
from vendors.hygon.fake.tree import DcuSpec
from vendors.hygon.health import CardState, Confirm


def events_for(seen: Sequence[object], device_id: str) -> list[tuple[str, Health]]:
    return [(e.device_id, e.health) for e in seen if isinstance(e, HealthEvent) and e.device_id == device_id]


def test_hot_removal_and_return(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    backend = hygon.backend(node)
    cards = backend.discover().cards
    stream = hygon.watch(backend)
    gone = cards[6]

    node.remove_card(gone.pci_address)
    down = stream.wait_for(gone.id, Health.UNHEALTHY)
    assert gone.pci_address in down.reason  # "PCI function … removed", or its driver unbind just before
    during = backend.discover().cards
    assert [c.id for c in during] == [c.id for c in cards], "a removed card stays, with its id and index"
    assert [c.health for c in during] == [Health.HEALTHY] * 6 + [Health.UNHEALTHY, Health.HEALTHY]
    assert during[6].index == 6 and during[6].memory_bytes == gone.memory_bytes

    node.restore_card(gone.pci_address)
    stream.wait_for(gone.id, Health.HEALTHY)
    assert all(c.health == Health.HEALTHY for c in backend.discover().cards)
    assert {e.device_id for e in stream.seen if isinstance(e, HealthEvent)} == {gone.id}, (
        "KFD renumbered every node behind the removed one; no other card noticed"
    )


def test_driver_unbind_and_rebind(hygon: Harness) -> None:
    node = hygon.node(pcie_node(4))
    backend = hygon.backend(node)
    card = backend.discover().cards[1]
    stream = hygon.watch(backend)

    node.unbind(card.pci_address)
    down = stream.wait_for(card.id, Health.UNHEALTHY)
    assert down.reason == f"driver unbound from {card.pci_address}"
    during = backend.discover().card(card.id)
    assert during is not None and during.id == card.id, "serial_number vanished with the driver; id kept"
    assert during.attributes[attr.DRM_CARD_MINOR] == card.attributes[attr.DRM_CARD_MINOR]

    node.bind(card.pci_address)
    stream.wait_for(card.id, Health.HEALTHY)
    assert events_for(stream.seen, card.id) == [(card.id, Health.UNHEALTHY), (card.id, Health.HEALTHY)]


def test_rebind_with_new_minors_asks_for_discovery(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    backend = hygon.backend(node)
    card = backend.discover().cards[0]
    stream = hygon.watch(backend)
    node.unbind(card.pci_address)
    stream.wait_for(card.id, Health.UNHEALTHY)

    node.bind(card.pci_address, card_minor=9, render_minor=140)
    stream.wait_inventory_changed()
    rediscovered = backend.discover().card(card.id)
    assert rediscovered is not None
    assert (rediscovered.attributes[attr.DRM_CARD_MINOR], rediscovered.attributes[attr.DRM_RENDER_MINOR]) == (
        "9",
        "140",
    )
    assert rediscovered.index == card.index
    stream.wait_for(card.id, Health.HEALTHY)
    paths = [
        d.container_path
        for d in backend.container_edits([Unit(id=card.id, card_id=card.id, backend="hygon")]).devices
    ]
    assert paths[-2:] == ["/dev/dri/card9", "/dev/dri/renderD140"]


def test_module_initstate_not_live_marks_every_card(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    backend = hygon.backend(node)
    cards = backend.discover().cards
    stream = hygon.watch(backend)

    node.set_initstate("going")
    initstate = node.host_root / "sys/module/hydcu/initstate"
    for card in cards:
        event = stream.wait_for(card.id, Health.UNHEALTHY)
        assert event.reason == f"{initstate}: 'going', not 'live'"
    node.set_initstate("live")
    for card in cards:
        stream.wait_for(card.id, Health.HEALTHY)


def test_malformed_numa_node_after_start_marks_only_that_card(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    backend = hygon.backend(node)
    cards = backend.discover().cards
    stream = hygon.watch(backend)
    bad = cards[3]
    numa = Path(node.host_root / "sys/bus/pci/devices" / bad.pci_address / "numa_node")

    node.corrupt(numa, "not-a-number\n")
    event = stream.wait_for(bad.id, Health.UNHEALTHY)
    assert event.reason == f"{numa}: not an integer: 'not-a-number'"
    node.corrupt(numa, "0\n")
    stream.wait_for(bad.id, Health.HEALTHY)
    assert {e.device_id for e in stream.seen if isinstance(e, HealthEvent)} == {bad.id}


def test_malformed_kfd_properties_after_start_marks_only_that_card(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    backend = hygon.backend(node)
    cards = backend.discover().cards
    stream = hygon.watch(backend)
    bad = cards[0]
    props = node.kfd_node_dir(bad.pci_address) / "properties"
    good = props.read_text()

    node.corrupt(props, good.replace("max_waves_per_simd 10", "max_waves_per_simd ten"))
    event = stream.wait_for(bad.id, Health.UNHEALTHY)
    assert event.reason == f"{props}: max_waves_per_simd: not an integer: 'ten'"
    node.corrupt(props, good)
    stream.wait_for(bad.id, Health.HEALTHY)
    assert {e.device_id for e in stream.seen if isinstance(e, HealthEvent)} == {bad.id}


def test_kfd_device_node_gone_marks_every_card(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    backend = hygon.backend(node)
    cards = backend.discover().cards
    stream = hygon.watch(backend)
    kfd = node.host_root / "dev/kfd"
    kfd.unlink()
    for card in cards:
        assert stream.wait_for(card.id, Health.UNHEALTHY).reason.endswith("dev/kfd missing")


def test_a_new_card_asks_for_discovery(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    backend = hygon.backend(node)
    assert len(backend.discover().cards) == 2
    stream = hygon.watch(backend)

    newcomer = DcuSpec(
        address="0000:03:02.0",
        card_minor=3,
        render_minor=130,
        numa_node=0,
        bridges=node.spec.dcus[0].bridges[:2],
        gpu_id=999,
        serial="TPXS32NEWCARD001",
    )
    node.add_card(newcomer)
    changed = stream.wait_inventory_changed()
    assert "new DCU function 0000:03:02.0 (" in changed.reason
    cards = backend.discover().cards
    assert [c.id for c in cards][-1] == "DCU-TPXS32NEWCARD001"
    assert [c.index for c in cards] == [0, 1, 2]
    assert cards[-1].health == Health.HEALTHY


def test_a_card_hot_added_mid_probe_ends_healthy_with_its_minors(hygon: Harness) -> None:
    """The race: the rediscovery a new card starts lands while its driver is still binding.

    Discovery then knows the card without DRM minors; when the probe finishes before the stream looks
    again, the card's completion must bring another rediscovery, or it stays Unhealthy for good.
    """
    node = hygon.node(pcie_node(2))
    backend = hygon.backend(node)
    backend.discover()
    stream = hygon.step(backend)
    newcomer = DcuSpec(
        address="0000:03:02.0",
        card_minor=3,
        render_minor=130,
        numa_node=0,
        bridges=node.spec.dcus[0].bridges[:2],
        gpu_id=999,
        serial="TPXS32NEWCARD001",
    )

    node.plug_card(newcomer)
    first = stream.next()
    assert isinstance(first, InventoryChanged)
    assert first.reason.endswith(": new DCU function 0000:03:02.0 (card?/renderD?)")
    half = backend.discover().cards[-1]  # what the supervisor does before the stream looks again
    assert (half.pci_address, half.health) == ("0000:03:02.0", Health.UNHEALTHY)
    assert attr.DRM_CARD_MINOR not in half.attributes

    node.bind(newcomer.address)  # the probe ends before the stream's next look
    again = stream.next_inventory_changed()
    assert "DRM minors of 0000:03:02.0 are card3/renderD130, not card?/renderD?" in again.reason
    whole = backend.discover().card(half.id)
    assert whole is not None and whole.index == 2, "the id and index the address got stay"
    assert (whole.attributes[attr.DRM_CARD_MINOR], whole.attributes[attr.DRM_RENDER_MINOR]) == ("3", "130")
    assert whole.health == Health.HEALTHY
    stream.next_for(half.id, Health.HEALTHY)
    paths = [
        d.container_path
        for d in backend.container_edits([Unit(id=half.id, card_id=half.id, backend="hygon")]).devices
    ]
    assert paths[-2:] == ["/dev/dri/card3", "/dev/dri/renderD130"]


def test_udev_auto_falls_back_to_rescan_on_a_test_root(hygon: Harness) -> None:
    node = hygon.node(pcie_node(1))
    backend = hygon.backend(node, {"udev": "auto"})
    card = backend.discover().cards[0]
    stream = hygon.watch(backend)
    node.remove_card(card.pci_address)
    stream.wait_for(card.id, Health.UNHEALTHY)


def test_card_unhealthy_at_start_recovers(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    node.unbind(node.addresses[1])
    backend = hygon.backend(node)
    cards = backend.discover().cards
    assert [c.health for c in cards] == [Health.HEALTHY, Health.UNHEALTHY]
    assert cards[1].id == f"DCU-pci-{node.addresses[1]}", "unbound at start: no serial to read"
    stream = hygon.watch(backend)
    node.bind(node.addresses[1])
    stream.wait_inventory_changed()  # its minors were unknown until now
    again = backend.discover().cards
    assert [c.id for c in again] == [c.id for c in cards], "the id an address got stays for the process"
    stream.wait_for(cards[1].id, Health.HEALTHY)


def test_a_kfd_only_fault_counts_when_two_checks_in_a_row_see_it() -> None:
    confirm = Confirm()
    glitch = CardState(Health.UNHEALTHY, "no KFD topology node", settling=True)
    removed = CardState(Health.UNHEALTHY, "PCI function removed")
    fine = CardState(Health.HEALTHY)
    assert confirm({"a": glitch, "b": removed}) == {"b": removed.verdict}, "KFD rebuild in progress?"
    assert confirm({"a": fine, "b": removed}) == {"a": fine.verdict, "b": removed.verdict}
    assert confirm({"a": glitch, "b": fine}) == {"b": fine.verdict}
    assert confirm({"a": glitch, "b": fine}) == {"a": glitch.verdict, "b": fine.verdict}, "still there: real"
    assert confirm({"a": glitch}) == {"a": glitch.verdict}
