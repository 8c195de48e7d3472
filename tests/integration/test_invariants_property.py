"""Property: random pool changes, allocations and releases never double-book a card.

Hypothesis drives a real daemon and the kubelet simulator over real sockets. After every step, once
the daemon has applied it, (1) no card is advertised under two resources at kubelet, and (2) no
card held by a running container is advertised under any resource other than the holder's. The
daemon's own view is checked too: no card in two pools' unit lists.

Settled states alone would miss a card that was in two pools for a few milliseconds while a move
was applied, so after the last step both rules are also checked over kubelet's whole recorded
timeline, every ListAndWatch message and allocation in kubelet's order.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.holds import hardware_id_of
from hcs_deviceplugin.kubeletsim import AllocationError
from hcs_deviceplugin.kubeletsim.timeline import CardOf, check_timeline, describe
from hcs_deviceplugin.model import Inventory
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource

POOLS = ("a", "b", "c")


@dataclass(frozen=True)
class Assign:
    """Rewrite the pools file: card i goes to pools[i] (None = no pool), with per-pool slices."""

    owners: tuple[str | None, ...]
    slices: tuple[int, ...]


@dataclass(frozen=True)
class Allocate:
    pool: str
    count: int


@dataclass(frozen=True)
class Release:
    index: int


steps = st.lists(
    st.one_of(
        st.builds(
            Assign,
            owners=st.tuples(*[st.sampled_from((*POOLS, None)) for _ in H100]),
            slices=st.tuples(*[st.sampled_from((1, 2)) for _ in POOLS]),
        ),
        st.builds(Allocate, pool=st.sampled_from(POOLS), count=st.integers(1, 2)),
        st.builds(Release, index=st.integers(0, 5)),
    ),
    min_size=1,
    max_size=6,
)


def card_mapper(inventory: Inventory) -> CardOf:
    """Unit id → the card it is part of: replicas and partitions (MIG) count as their parent card."""
    parent = {p.id: p.card_id for p in inventory.partitions}

    def card(unit_id: str) -> str:
        hardware = hardware_id_of(unit_id)
        return parent.get(hardware, hardware)

    return card


def check_whole_timeline(node: Node, card_of: CardOf) -> None:
    """Invariant 1 and the held-card rule at every moment kubelet recorded, not only settled ones."""
    events = node.kubelet.timeline()
    assert events, "kubelet recorded no timeline"
    violations = check_timeline(events, card_of=card_of)
    assert not violations, describe(violations, events[-1].time)


def check_invariants(node: Node, view: DaemonView, card_of: CardOf) -> None:
    in_pools: dict[str, str] = {}
    for name, pool_view in view.pools.items():
        for unit in pool_view.units:
            other = in_pools.setdefault(unit.card_id, name)
            assert other == name, f"{unit.card_id} in pools {other} and {name}"
    advertised: dict[str, set[str]] = {}
    for name, res in node.kubelet.resources().items():
        for unit_id in res.healthy | res.unhealthy:
            advertised.setdefault(card_of(unit_id), set()).add(name)
    for card, names in advertised.items():
        assert len(names) == 1, f"kubelet sees {card} under {sorted(names)}"
    for record in node.kubelet.allocations():
        for unit_id in record.device_ids:
            names = advertised.get(card_of(unit_id), set())
            assert names <= {record.resource}, f"held {unit_id} ({record.resource}) advertised by {names}"


def settle(node: Node) -> DaemonView:
    """Wait until kubelet's view equals what the daemon serves (the step has been applied)."""
    assert node.daemon is not None
    daemon = node.daemon

    def converged(v: DaemonView) -> bool:
        resources = node.kubelet.resources()
        for pool_view in v.pools.values():
            res = resources.get(pool_view.pool.resource_name)
            if res is None or not res.connected:
                return False
            if res.healthy | res.unhealthy != {u.id for u in pool_view.units}:
                return False
        return not v.config_errors

    return daemon.wait_for(converged, WAIT, "kubelet to match the daemon")


# Each example starts a whole node (about 1-2 s on 2 idle cores); the budget leaves room for a
# loaded CI machine, because pytest-timeout's alarm interrupting a condition wait breaks the lock.
@pytest.mark.timeout(600)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=steps)
def test_random_changes_never_double_book(
    node_factory: Callable[[], AbstractContextManager[Node]], script: list[object]
) -> None:
    with node_factory() as node:
        node.write_pools(pool_doc(*(card_pool(p) for p in POOLS)))
        node.start_daemon()
        node.wait_registered(*POOLS)
        card_of = card_mapper(node.backend.discover())
        pods: list[str] = []
        for n, step in enumerate(script):
            if isinstance(step, Assign):
                pools = [
                    card_pool(
                        p, *[c for c, o in zip(H100, step.owners, strict=True) if o == p], slicesPerUnit=s
                    )
                    for p, s in zip(POOLS, step.slices, strict=True)
                ]
                node.write_pools(pool_doc(*pools))
            elif isinstance(step, Allocate):
                try:
                    node.kubelet.allocate(f"pod-{n}", "main", resource(step.pool), step.count)
                    pods.append(f"pod-{n}")
                except (AllocationError, KeyError):
                    pass  # not enough free units in that pool right now: kubelet would reject too
            elif isinstance(step, Release) and pods:
                node.kubelet.free_pod(pods.pop(step.index % len(pods)))
            check_invariants(node, settle(node), card_of)
        check_whole_timeline(node, card_of)
