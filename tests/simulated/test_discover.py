"""Discovery and links: what the core sees of a simulated node."""

from __future__ import annotations

import itertools

from hcs_deviceplugin.backend import Backend
from hcs_deviceplugin.model import Health, Link, LinkKind
from tests.simulated.conftest import card, make_backend
from vendors.simulated import SimulatedBackend, load_builtin_node

MIB = 1024 * 1024


def default_backend() -> SimulatedBackend:
    return SimulatedBackend(load_builtin_node("default"))


def test_is_a_backend() -> None:
    backend = default_backend()
    assert isinstance(backend, Backend)
    assert backend.name == "simulated"
    assert backend.node_name == "hcs-sim-node"


def test_default_inventory_cards() -> None:
    inventory = default_backend().discover()
    assert len(inventory.cards) == 10
    assert all(c.backend == "simulated" for c in inventory.cards)
    assert [c.vendor for c in inventory.cards] == ["nvidia"] * 4 + ["ascend"] * 2 + ["hygon"] * 2 + [
        "cambricon"
    ] * 2
    assert len({c.id for c in inventory.cards}) == 10
    assert all(c.health is Health.HEALTHY for c in inventory.cards)
    first = inventory.cards[0]
    assert first.id == "GPU-fb7997af-015e-5593-a98f-d07392e85cd7"
    assert (first.pci_address, first.pci_vendor_id, first.pci_device_id) == ("0000:17:00.0", 0x10DE, 0x2330)
    assert first.memory_bytes == 81559 * MIB
    assert [c.numa_node for c in inventory.cards[:4]] == [0, 0, 1, 1]
    assert inventory.card("0000:63:00.0") is not None


def test_default_inventory_partitions() -> None:
    inventory = default_backend().discover()
    mig_card = inventory.cards[3]
    assert [(p.card_id, p.profile, p.memory_bytes) for p in inventory.partitions] == [
        (mig_card.id, "1g.10gb", 9984 * MIB),
        (mig_card.id, "1g.10gb", 9984 * MIB),
    ]


def test_links_are_symmetric_and_complete_for_nvlink() -> None:
    backend = default_backend()
    inventory = backend.discover()
    links = backend.links()
    assert inventory.links == links
    h100 = [c.id for c in inventory.cards[:4]]
    for a, b in itertools.permutations(h100, 2):
        assert links.between(a, b) == (Link(LinkKind.NVLINK, 6, 1200.0),)
        assert links.between(a, b) == links.between(b, a)
    ascend = [c.id for c in inventory.cards if c.vendor == "ascend"]
    assert links.between(*ascend)[0].kind is LinkKind.HCCS
    assert links.between(h100[0], ascend[0]) == (), "no link across vendors: only through the host"


def test_several_links_between_one_pair() -> None:
    backend = make_backend(
        {
            "cards": [card("a"), card("b")],
            "links": [
                {"a": "a", "b": "b", "kind": "NVLink", "count": 2},
                {"a": "b", "b": "a", "kind": "PCIe-switch"},
            ],
        }
    )
    assert [link.kind for link in backend.links().between("b", "a")] == [
        LinkKind.NVLINK,
        LinkKind.PCIE_SWITCH,
    ]


def test_card_attributes_and_unknown_numa() -> None:
    backend = make_backend({"cards": [card("a", attributes={"formFactor": "SXM5"})]})
    only = backend.discover().cards[0]
    assert dict(only.attributes) == {"formFactor": "SXM5"}
    assert only.numa_node is None


def test_discover_returns_a_fresh_equal_snapshot() -> None:
    backend = default_backend()
    assert backend.discover() == backend.discover()
