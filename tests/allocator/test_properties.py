"""Properties over random topologies: request invariants, determinism, and search quality.

Random nodes mix every link kind (fabric with or without a host path, PCIe relations, nothing),
NUMA nodes (some unknown), and sometimes ``linkGroup``/``linkModule`` attributes. The exhaustive
reference below scores every set with the public objective; the allocator must find exactly its
answer on every node of up to 16 cards (whole cards, and replicas with load), and never do worse
than the plain greedy beyond that. Large island nodes are in ``test_islands.py``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.allocation import GROUP_ATTRIBUTE, MODULE_ATTRIBUTE, Topology
from hcs_deviceplugin.allocation.policy import ReplicaPolicy
from hcs_deviceplugin.allocation.select import CardRequest, Key, Objective, choose, greedy_baseline, improved
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit, replica_unit_id

LINK_CHOICES: tuple[tuple[Link, ...], ...] = (
    (),
    (),
    (Link(LinkKind.NVLINK, 1),),
    (Link(LinkKind.NVLINK, 2), Link(LinkKind.PCIE_SWITCH)),
    (Link(LinkKind.NVLINK, 4),),
    (Link(LinkKind.NVLINK, 1), Link(LinkKind.CROSS_SOCKET)),
    (Link(LinkKind.HCCS),),
    (Link(LinkKind.XGMI, 2),),
    (Link(LinkKind.MLU_LINK, 2),),
    (Link(LinkKind.PCIE_SWITCH),),
    (Link(LinkKind.PCIE_HOST_BRIDGE),),
    (Link(LinkKind.SAME_NUMA),),
    (Link(LinkKind.CROSS_SOCKET),),
)


@dataclass(frozen=True)
class RandomNode:
    cards: dict[str, Card]
    links: LinkMatrix
    available: list[str]
    must: list[str]
    size: int

    @property
    def whole(self) -> dict[str, Unit]:
        return {c.id: Unit(c.id, c.id, "t", numa_node=c.numa_node) for c in self.cards.values()}


def random_node(seed: int, n: int) -> RandomNode:
    rng = random.Random(seed)
    groups, modules = rng.random() < 0.3, rng.random() < 0.3
    cards: dict[str, Card] = {}
    for i in range(n):
        attributes = {}
        if groups:
            attributes[GROUP_ATTRIBUTE] = str(rng.randrange(3))
        if modules:
            attributes[MODULE_ATTRIBUTE] = f"m{i // 2}"
        cid = f"c{i:02d}"
        cards[cid] = Card(cid, "t", "t", "t", i, numa_node=rng.choice([0, 1, 1, None]), attributes=attributes)
    ids = list(cards)
    pairs = [(a, b, link) for a, b in combinations(ids, 2) for link in rng.choice(LINK_CHOICES)]
    available = [c for c in ids if rng.random() < 0.8]
    rng.shuffle(available)
    must = rng.sample(available, k=min(len(available), rng.choice([0, 0, 0, 1, 2]))) if available else []
    if rng.random() < 0.1:
        must.append(rng.choice(ids))
    size = rng.randrange(0, n + 2)
    return RandomNode(cards, LinkMatrix.from_pairs(pairs), available, must, size)


def card_request(topo: Topology, node: RandomNode) -> CardRequest:
    """The card-level request the allocator builds for a whole-card pool (see ``policy``)."""
    must = list(dict.fromkeys(node.must))
    fixed = tuple(sorted({topo.position[c] for c in must}))
    candidates = tuple(sorted({topo.position[c] for c in node.available if c not in must}))
    return CardRequest(fixed, candidates, max(0, node.size - len(must)), fragmentation=True)


SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def exhaustive(objective: Objective, count: int) -> tuple[int, ...]:
    """Every set scored by the objective; the first best in position order (what the key says)."""
    best: Key | None = None
    tied: list[tuple[int, ...]] = []
    for combo in combinations(objective.candidates, count):
        k = objective.prefix(combo)
        if best is None or k > best:
            best, tied = k, [combo]
        elif k == best:
            tied.append(combo)
    return max(tied, key=objective.key) if tied else ()


@settings(max_examples=300, deadline=None)
@given(seed=SEEDS, n=st.integers(min_value=1, max_value=16))
def test_request_invariants(seed: int, n: int) -> None:
    node = random_node(seed, n)
    topo = Topology.build(node.cards, node.links)
    chosen = topo.preferred(node.available, node.must, node.size, node.whole)
    pool = set(node.available) | set(node.must)
    must = list(dict.fromkeys(node.must))
    assert len(chosen) == max(0, min(node.size, len(pool)))
    assert len(set(chosen)) == len(chosen)
    assert set(chosen) <= pool
    assert chosen[: len(must)] == must[: len(chosen)]
    assert chosen == topo.preferred(node.available, node.must, node.size, node.whole), "deterministic"
    shuffled = list(reversed(node.available))
    assert chosen == topo.preferred(shuffled, node.must, node.size, node.whole), "kubelet's order is noise"


@settings(max_examples=300, deadline=None)
@given(seed=SEEDS, n=st.integers(min_value=1, max_value=12))
def test_optimal_whenever_at_most_twelve_cards(seed: int, n: int) -> None:
    # Many examples on small nodes; ``test_exact_on_every_node_of_up_to_sixteen_cards`` goes to 16.
    node = random_node(seed, n)
    topo = Topology.build(node.cards, node.links)
    request = card_request(topo, node)
    objective = Objective(topo, request)
    count = min(request.count, len(objective.candidates))
    chosen = topo.preferred(node.available, node.must, node.size, node.whole)
    added = sorted(topo.position[c] for c in chosen if c not in node.must)
    best = max(combinations(objective.candidates, count), key=objective.key)
    assert objective.key(added) == objective.key(best)
    assert tuple(added) == best
    assert objective.key(added) >= objective.key(greedy_baseline(objective, count))
    assert objective.key(best) >= objective.key(improved(objective, count)) if count else True


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, n=st.integers(min_value=13, max_value=16))
def test_exact_on_every_node_of_up_to_sixteen_cards(seed: int, n: int) -> None:
    node = random_node(seed, n)
    topo = Topology.build(node.cards, node.links)
    request = card_request(topo, node)
    objective = Objective(topo, request)
    count = min(request.count, len(objective.candidates))
    chosen = topo.preferred(node.available, node.must, node.size, node.whole)
    added = tuple(sorted(topo.position[c] for c in chosen if c not in node.must))
    assert added == exhaustive(objective, count)


@settings(max_examples=150, deadline=None)
@given(seed=SEEDS, n=st.integers(min_value=1, max_value=12), replicas=st.integers(min_value=2, max_value=4))
def test_replicas_settle_load_first_and_stay_exact(seed: int, n: int, replicas: int) -> None:
    # The card-level request a spread shared pool makes: distinct cards, held replicas as load.
    node = random_node(seed, n)
    topo = Topology.build(node.cards, node.links)
    rng = random.Random(seed)
    load = tuple(rng.randrange(replicas) for _ in range(len(topo)))
    base = card_request(topo, node)
    request = CardRequest(base.fixed, base.candidates, base.count, load=load, fragmentation=False)
    objective = Objective(topo, request)
    count = min(request.count, len(objective.candidates))
    assert choose(topo, request) == exhaustive(objective, count)


@settings(max_examples=120, deadline=None)
@given(seed=SEEDS, n=st.integers(min_value=17, max_value=28))
def test_never_worse_than_plain_greedy_beyond_sixteen(seed: int, n: int) -> None:
    node = random_node(seed, n)
    topo = Topology.build(node.cards, node.links)
    request = card_request(topo, node)
    objective = Objective(topo, request)
    count = min(request.count, len(objective.candidates))
    chosen = topo.preferred(node.available, node.must, node.size, node.whole)
    added = [topo.position[c] for c in chosen if c not in node.must]
    assert objective.key(added) >= objective.key(greedy_baseline(objective, count))


@settings(max_examples=150, deadline=None)
@given(seed=SEEDS, n=st.integers(min_value=1, max_value=10), replicas=st.integers(min_value=1, max_value=4))
def test_shared_pools_spread_over_distinct_cards_first(seed: int, n: int, replicas: int) -> None:
    node = random_node(seed, n)
    units = {
        replica_unit_id(c, r): Unit(replica_unit_id(c, r), c, "t", replica=r, numa_node=card.numa_node)
        for c, card in node.cards.items()
        for r in range(replicas)
    }
    rng = random.Random(seed)
    available = [u for u in units if rng.random() < 0.7]
    size = rng.randrange(0, len(units) + 2)
    topo = Topology.build(node.cards, node.links)
    chosen = topo.preferred(available, [], size, units)
    assert len(chosen) == min(size, len(available)) and set(chosen) <= set(available)
    cards_offered = {units[u].card_id for u in available}
    assert len({units[u].card_id for u in chosen}) == min(len(chosen), len(cards_offered))
    packed = topo.preferred(available, [], size, units, ReplicaPolicy.PACK)
    assert len(set(packed)) == len(packed) == len(chosen) and set(packed) <= set(available)
