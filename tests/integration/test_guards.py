"""Guards for steps of the daemon that the happy path does not need, so nothing else would miss them.

Each test drives a real daemon and the kubelet simulator over real sockets into the one situation
where its step matters and fails if the step is left out: a pool option changed with the same units,
an Allocate that pod-resources cannot confirm yet, a card moved between two live pools, a pool
removed while kubelet streams it. Invariant 1 is checked over kubelet's whole recorded timeline,
because a broken step shows as a card advertised twice for milliseconds, never in a settled state.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.daemon import Daemon, DaemonView
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.timeline import Kind, TimelineEvent, check_timeline, describe, strip_replica
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource

MOVES = 30
"""Moves of one card between two live pools. Without the applier's withdraw wait 15-20 of 30 moves
overlapped (0.1-3 ms each, measured on 2 loaded cores), so leaving it out fails every run."""


def assert_timeline_clean(node: Node) -> list[TimelineEvent]:
    events = node.kubelet.timeline()
    violations = check_timeline(events, card_of=strip_replica)
    assert not violations, describe(violations, events[-1].time)
    return events


def preferred(node: Node, pool: str, size: int) -> list[str]:
    """GetPreferredAllocation on the pool's own socket, offering every unit kubelet knows of it."""
    available = sorted(node.kubelet.resource(resource(pool)).healthy)
    with grpc.insecure_channel(f"unix:{node.plugin_dir / f'hcs-gpu.deckhouse.io_{pool}.sock'}") as ch:
        answer = pb_grpc.DevicePluginStub(ch).GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available, allocation_size=size
                    )
                ]
            ),
            timeout=WAIT,
        )
    return list(answer.container_responses[0].deviceIDs)


def cards_of(unit_ids: list[str]) -> set[str]:
    return {strip_replica(u) for u in unit_ids}


def applied(daemon: Daemon) -> None:
    assert daemon.applier.wait_idle(WAIT), "server applier idle"


def kubelet_caught_up(node: Node, daemon: Daemon) -> None:
    """Wait until kubelet lists for every pool what its server advertises (the servers side is no
    proof: a message is sent before the other end has it)."""

    def same(v: DaemonView) -> bool:
        resources = node.kubelet.resources()
        return all(
            (res := resources.get(p.pool.resource_name)) is not None
            and res.healthy | res.unhealthy == {u.id for u in p.units}
            for p in v.pools.values()
        )

    daemon.wait_for(same, WAIT, "kubelet to list what the servers advertise")


def test_a_changed_replica_placement_with_the_same_units_reaches_preferred_allocation(node: Node) -> None:
    # "other" is a marker: gaining a card in the same rewrite shows when that rewrite was applied,
    # whether or not the change to "shared" (same units, new placement) was.
    shared = ("shared", H100[0], H100[1])
    node.write_pools(pool_doc(card_pool(*shared, slicesPerUnit=4), card_pool("other", H100[2])))
    daemon = node.start_daemon()
    node.wait_registered("shared", "other")
    assert len(cards_of(preferred(node, "shared", 2))) == 2, "spread: two replicas on two cards"

    node.write_pools(
        pool_doc(
            card_pool(*shared, slicesPerUnit=4, replicaPlacement="pack"),
            card_pool("other", H100[2], H100[3]),
        )
    )
    node.kubelet.wait_for(lambda k: H100[3] in k.resource(resource("other")).healthy, WAIT, "marker")
    applied(daemon)
    assert len(cards_of(preferred(node, "shared", 2))) == 1, "pack: two replicas on one card"
    assert daemon.view().pools["shared"].pool.replica_placement == "pack"


def test_an_allocated_card_moved_by_the_config_stays_out_of_its_new_pool_until_freed(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("from", H100[0], H100[1]), card_pool("to", H100[2])))
    daemon = node.start_daemon()
    node.wait_registered("from", "to")
    # pod-resources answers 1.5 s late (and stale): only Allocate's own hold can know the card is
    # taken while the config moves it.
    node.kubelet.pod_resources_delay = 1.5
    card = node.kubelet.allocate("pod", "main", resource("from"), 1).device_ids[0]
    rest = H100[1] if card == H100[0] else H100[0]
    node.write_pools(pool_doc(card_pool("from", rest), card_pool("to", H100[2], card)))
    daemon.wait_for(
        lambda v: card in v.draining or card in {u.id for u in v.pools["to"].units},
        WAIT,
        "the move applied or held back",
    )
    applied(daemon)
    kubelet_caught_up(node, daemon)
    assert card not in node.kubelet.resource(resource("to")).healthy, "held card advertised by its new pool"
    assert_timeline_clean(node)

    node.kubelet.pod_resources_delay = 0.0
    node.kubelet.free_pod("pod")
    node.kubelet.wait_for(lambda k: card in k.resource(resource("to")).healthy, WAIT, "freed card moves")
    assert_timeline_clean(node)


def moved(card: str, src: str, dst: str) -> Callable[[KubeletSimulator], bool]:
    def check(kubelet: KubeletSimulator) -> bool:
        return (
            card in kubelet.resource(resource(dst)).healthy
            and card not in kubelet.resource(resource(src)).healthy
        )

    return check


def test_a_card_moved_between_live_pools_is_never_advertised_by_both(node: Node) -> None:
    # Each pool keeps a card of its own, so both streams stay open and busy; H100[1] travels.
    home = {"a": H100[0], "b": H100[2]}
    node.write_pools(pool_doc(card_pool("a", home["a"], H100[1]), card_pool("b", home["b"])))
    node.start_daemon()
    node.wait_registered("a", "b")
    for n in range(MOVES):
        src, dst = ("a", "b") if n % 2 == 0 else ("b", "a")
        node.write_pools(pool_doc(card_pool(src, home[src]), card_pool(dst, home[dst], H100[1])))
        node.kubelet.wait_for(moved(H100[1], src, dst), WAIT, f"move {n} to {dst}")
    events = assert_timeline_clean(node)
    lists = [e for e in events if e.kind is Kind.LIST and H100[1] in e.ids]
    assert len({e.resource for e in lists}) == 2 and len(lists) > MOVES, "the card did move each time"


def test_a_removed_pool_advertises_nothing_before_its_stream_ends(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("keep", H100[0]), card_pool("gone", H100[1], H100[2])))
    daemon = node.start_daemon()
    node.wait_registered("keep", "gone")
    node.write_pools(pool_doc(card_pool("keep", H100[0])))
    daemon.wait_for(lambda v: "gone" not in v.pools, WAIT, "pool removed")
    node.kubelet.wait_for(lambda k: not k.resource(resource("gone")).connected, WAIT, "stream closed")
    gone = [e for e in node.kubelet.timeline() if e.resource == resource("gone")]
    kinds = [e.kind for e in gone]
    assert Kind.END in kinds, kinds
    end = kinds.index(Kind.END)
    before = [e for e in gone[:end] if e.kind is Kind.LIST]
    assert before and before[0].ids == {H100[1], H100[2]}
    assert before[-1].ids == frozenset(), f"last list before the stream ended: {sorted(before[-1].ids)}"
