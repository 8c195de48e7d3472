"""Shared pools: time-slice replicas and partitions, grouped by parent card, spread or packed."""

from __future__ import annotations

from hcs_deviceplugin.allocation import Topology
from hcs_deviceplugin.allocation.policy import ReplicaPolicy
from hcs_deviceplugin.model import Unit, replica_unit_id
from tests.allocator.loader import TOPOLOGIES, load

DGX = load(TOPOLOGIES / "dgx-h100-nvswitch.yaml")
TOPO = Topology.build(DGX.cards, DGX.links)
REPLICAS = {
    replica_unit_id(c.id, r): Unit(replica_unit_id(c.id, r), c.id, "t", replica=r, numa_node=c.numa_node)
    for c in DGX.cards.values()
    for r in range(4)
}


def offered(*held: str) -> list[str]:
    return [u for u in REPLICAS if u not in held]


def test_two_replicas_go_to_two_well_linked_cards() -> None:
    assert TOPO.preferred(offered(), [], 2, REPLICAS) == ["gpu0::0", "gpu1::0"]


def test_one_replica_goes_to_the_least_loaded_card() -> None:
    held = ("gpu0::0", "gpu0::1", "gpu0::2", "gpu0::3", "gpu1::0")
    assert TOPO.preferred(offered(*held), [], 1, REPLICAS) == ["gpu2::0"]
    # Only gpu0::3 and all of gpu7 are offered: gpu0 carries three replicas, gpu7 none.
    all_of_gpu7 = [u for u in REPLICAS if u.startswith("gpu7")]
    assert TOPO.preferred(["gpu0::3", *all_of_gpu7], [], 1, REPLICAS) == ["gpu7::0"]


def test_load_outranks_links_for_shared_units() -> None:
    # gpu1 already runs two replicas: a fresh pair behind another switch is better than gpu0+gpu1.
    assert TOPO.preferred(offered("gpu1::0", "gpu1::1"), [], 2, REPLICAS) == ["gpu2::0", "gpu3::0"]


def test_more_replicas_than_cards_spread_before_doubling_up() -> None:
    chosen = TOPO.preferred(offered(), [], 10, REPLICAS)
    assert chosen == [f"gpu{i}::0" for i in range(8)] + ["gpu0::1", "gpu1::1"]


def test_must_include_then_its_best_partner() -> None:
    assert TOPO.preferred(offered(), ["gpu5::2"], 2, REPLICAS) == ["gpu5::2", "gpu4::0"]


def test_pack_fills_the_most_loaded_card_then_its_best_neighbour() -> None:
    pack = ReplicaPolicy.PACK
    assert TOPO.preferred(offered("gpu6::0"), [], 3, REPLICAS, pack) == ["gpu6::1", "gpu6::2", "gpu6::3"]
    five = TOPO.preferred(offered("gpu6::0"), [], 5, REPLICAS, pack)
    assert five == ["gpu6::1", "gpu6::2", "gpu6::3", "gpu7::0", "gpu7::1"]
    with_must = TOPO.preferred(offered("gpu6::0"), ["gpu2::1"], 3, REPLICAS, pack)
    assert with_must == ["gpu2::1", "gpu2::0", "gpu2::2"]


def _mig() -> dict[str, Unit]:
    return {
        f"MIG-{g}{p}": Unit(f"MIG-{g}{p}", f"gpu{g}", "t", partition_id=f"MIG-{g}{p}", numa_node=0)
        for g in range(2)
        for p in "abc"
    }


def test_partitions_group_by_parent_card() -> None:
    mig = _mig()
    topo = Topology.build([DGX.cards["gpu0"], DGX.cards["gpu1"]], DGX.links)
    assert topo.preferred(list(mig), [], 2, mig) == ["MIG-0a", "MIG-1a"]
    assert topo.preferred(list(mig), [], 2, mig, ReplicaPolicy.PACK) == ["MIG-0a", "MIG-0b"]
    assert topo.preferred([u for u in mig if u != "MIG-0a"], [], 1, mig) == ["MIG-1a"]


def test_time_sliced_partitions_take_the_least_used_partition_of_a_card() -> None:
    units = {
        f"{p}::{r}": Unit(f"{p}::{r}", "gpu0", "t", partition_id=p, replica=r, numa_node=0)
        for p in ("p0", "p1")
        for r in range(2)
    }
    topo = Topology.build([DGX.cards["gpu0"]], DGX.links)
    free = [u for u in units if u != "p0::0"]
    assert topo.preferred(free, [], 1, units) == ["p1::0"]
    assert topo.preferred(free, [], 2, units) == ["p1::0", "p0::1"]
