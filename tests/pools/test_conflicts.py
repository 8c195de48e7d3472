"""Which device entries name one card: the in-pool duplicate rule and the cross-pool conflict report."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.model import DeviceSelector, Pool
from hcs_deviceplugin.pools.conflicts import DeviceKey, find_conflicts, selectors_overlap


def pool(name: str, *devices: DeviceSelector) -> Pool:
    return Pool(name=name, resource_name=f"gpu.deckhouse.io/{name}", devices=devices)


PCI = "0000:17:00.0"


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        pytest.param(DeviceSelector(uuid="G1"), DeviceSelector(uuid="G1"), True, id="same-uuid"),
        pytest.param(DeviceSelector(uuid="G1"), DeviceSelector(uuid="G2"), False, id="other-uuid"),
        pytest.param(DeviceSelector(uuid="G1"), DeviceSelector(inventory_id="G1"), False, id="other-kind"),
        pytest.param(
            DeviceSelector(pci_address=PCI, node="w1"),
            DeviceSelector(pci_address=PCI, node="w2"),
            False,
            id="pci-other-node",
        ),
        pytest.param(
            DeviceSelector(pci_address=PCI, node="w1"),
            DeviceSelector(pci_address=PCI),
            True,
            id="pci-any-node",
        ),
        pytest.param(DeviceSelector(), DeviceSelector(), False, id="empty-selectors"),
        pytest.param(DeviceSelector(pattern="*"), DeviceSelector(pattern="*"), True, id="same-pattern"),
        pytest.param(
            DeviceSelector(pattern="GPU-1"), DeviceSelector(pattern="GPU-"), False, id="other-pattern"
        ),
        pytest.param(
            DeviceSelector(pattern="^$"), DeviceSelector(pattern="^$"), False, id="placeholder-claims-none"
        ),
        pytest.param(DeviceSelector(pattern="G1"), DeviceSelector(uuid="G1"), False, id="pattern-vs-uuid"),
    ],
)
def test_selectors_overlap(a: DeviceSelector, b: DeviceSelector, overlap: bool) -> None:
    assert selectors_overlap(a, b) is overlap
    assert selectors_overlap(b, a) is overlap


def test_no_conflicts() -> None:
    pools = [pool("a", DeviceSelector(uuid="G1")), pool("b", DeviceSelector(uuid="G2"))]
    assert find_conflicts(pools) == {}


def test_card_in_two_pools() -> None:
    pools = [
        pool("b", DeviceSelector(uuid="G1"), DeviceSelector(uuid="G2")),
        pool("a", DeviceSelector(uuid="G1")),
        pool("c", DeviceSelector(uuid="G1")),
    ]
    assert find_conflicts(pools) == {DeviceKey("uuid", "G1"): ["a", "b", "c"]}


def test_node_limited_entries_conflict_per_node() -> None:
    pools = [
        pool("any", DeviceSelector(pci_address=PCI)),
        pool("w1", DeviceSelector(pci_address=PCI, node="w1")),
        pool("w2", DeviceSelector(pci_address=PCI, node="w2")),
        pool("w2-too", DeviceSelector(pci_address=PCI, node="w2")),
    ]
    assert find_conflicts(pools) == {
        DeviceKey("pciAddress", PCI, "w1"): ["any", "w1"],
        DeviceKey("pciAddress", PCI, "w2"): ["any", "w2", "w2-too"],
    }


def test_entries_on_disjoint_nodes_do_not_conflict() -> None:
    pools = [
        pool("w1", DeviceSelector(pci_address=PCI, node="w1")),
        pool("w2", DeviceSelector(pci_address=PCI, node="w2")),
    ]
    assert find_conflicts(pools) == {}


def test_device_key_reads_well() -> None:
    assert str(DeviceKey("uuid", "G1")) == "uuid=G1"
    assert str(DeviceKey("pciAddress", PCI, "w1")) == f"pciAddress={PCI} on node w1"


def test_star_patterns_of_older_dkp_renderings_conflict() -> None:
    star = DeviceSelector(pattern="*")
    assert find_conflicts([pool("a", star), pool("b", star), pool("c", DeviceSelector(pattern="^$"))]) == {
        DeviceKey("pattern", "*"): ["a", "b"]
    }
