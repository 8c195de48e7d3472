"""A pool streams before its topology is built; GetPreferredAllocation answers exactly all the same.

``run`` builds the topologies once its pools stream (``Daemon.prepare_allocation``); a daemon that
has not (these in-process ones) builds each on its pool's first GetPreferredAllocation.
"""

from __future__ import annotations

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.daemon import Daemon
from hcs_deviceplugin.plugin.topology import PoolTopology
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource
from tests.integration.test_plugin_api import plugin_stub
from tests.waiting import wait_until


def pending(daemon: Daemon, pool: str) -> PoolTopology:
    topology = daemon.server(pool).state.snapshot.topology
    assert topology is not None
    return topology


def preferred(node: Node, pool: str, available: list[str], must: list[str], size: int) -> list[str]:
    channel, stub = plugin_stub(node, pool)
    with channel:
        answer = stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                    )
                ]
            ),
            timeout=WAIT,
        )
    return list(answer.container_responses[0].deviceIDs)


def test_the_first_preferred_allocation_builds_the_topology_and_answers_exactly(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", *H100)))
    daemon = node.start_daemon()
    node.wait_registered("train")
    assert not pending(daemon, "train").built, "a pool streams before its topology is built"
    chosen = preferred(node, "train", sorted(H100), [H100[2]], 2)
    snapshot = daemon.server("train").state.snapshot
    cards = [c for c in daemon.view().cards if c.id in H100]
    expected = Topology.build(cards, daemon.links(), snapshot.units).preferred(
        sorted(H100), [H100[2]], 2, snapshot.by_id
    )
    assert chosen == expected
    assert set(chosen) == {H100[2], H100[3]}, "the NVLink pair on the same NUMA node"
    assert pending(daemon, "train").built


def test_prepare_allocation_builds_every_topology_and_each_later_apply_builds_its_own(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", *H100[:2]), card_pool("infer", H100[2])))
    daemon = node.start_daemon()
    node.wait_registered("train", "infer")
    assert not pending(daemon, "train").built and not pending(daemon, "infer").built
    daemon.prepare_allocation()
    assert pending(daemon, "train").built and pending(daemon, "infer").built
    node.write_pools(
        pool_doc(card_pool("train", H100[0]), card_pool("infer", H100[2]), card_pool("new", H100[3]))
    )
    node.wait_registered("new")
    node.kubelet.wait_for(lambda k: k.resource(resource("train")).healthy == {H100[0]}, WAIT, "train shrunk")
    wait_until(lambda: pending(daemon, "new").built, what="the new pool's topology, built by the apply")
    wait_until(lambda: pending(daemon, "train").built, what="the changed pool's topology, built by the apply")
    assert len(pending(daemon, "train").get()) == 1
