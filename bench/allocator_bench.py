"""Allocator latency on large nodes and choice quality against the exhaustive optimum.

Latency: ``Topology.preferred`` on a precomputed topology (what a pool does per request), for 8 units
out of 64 whole cards (NVSwitch islands of 8, past the exhaustive limit so the greedy search runs),
out of 512 time-slice replicas (64 cards x 8), and out of 512 whole cards. Every sample holds a
different random quarter of the node, so no two requests are alike.

Quality: on 1,000 random 8-card topologies (every link kind, random NUMA, random free cards and
must-include, sizes 2-6) the weakest-pair score of the set chosen, over that of the exhaustive
optimum of the same objective; also the sum of pair scores, and the same ratios for the greedy
search forced on the same inputs and for plain greedy, to show what the exhaustive path buys.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from itertools import combinations

from bench.common import fmt, percentile
from hcs_deviceplugin.allocation import Topology
from hcs_deviceplugin.allocation.select import CardRequest, Objective, greedy_baseline, improved
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit, replica_unit_id

LINK_CHOICES: tuple[tuple[Link, ...], ...] = (
    (),
    (Link(LinkKind.NVLINK, 1),),
    (Link(LinkKind.NVLINK, 2), Link(LinkKind.PCIE_SWITCH)),
    (Link(LinkKind.NVLINK, 4),),
    (Link(LinkKind.HCCS),),
    (Link(LinkKind.XGMI, 2),),
    (Link(LinkKind.MLU_LINK, 2),),
    (Link(LinkKind.PCIE_SWITCH),),
    (Link(LinkKind.PCIE_HOST_BRIDGE),),
    (Link(LinkKind.SAME_NUMA),),
    (Link(LinkKind.CROSS_SOCKET),),
)


def island_node(cards: int) -> tuple[list[Card], LinkMatrix]:
    """GPUs in NVSwitch islands of 8 (12 NVLinks a pair), two islands per NUMA node."""
    node = [Card(f"g{i:03d}", "bench", "bench", "bench", i, numa_node=i // 16) for i in range(cards)]
    pairs = [
        (a.id, b.id, Link(LinkKind.NVLINK, 12))
        for start in range(0, cards, 8)
        for j, a in enumerate(node[start : start + 8])
        for b in node[start + j + 1 : start + 8]
    ]
    return node, LinkMatrix.from_pairs(pairs)


def latency(name: str, cards: int, replicas: int, samples: int, rng: random.Random) -> str:
    node, links = island_node(cards)
    topology = Topology.build(node, links)
    if replicas == 1:
        units = {c.id: Unit(c.id, c.id, "bench", numa_node=c.numa_node) for c in node}
    else:
        units = {
            (uid := replica_unit_id(c.id, r)): Unit(uid, c.id, "bench", replica=r, numa_node=c.numa_node)
            for c in node
            for r in range(replicas)
        }
    ids = list(units)
    times: list[float] = []
    for _ in range(samples):
        available = [u for u in ids if rng.random() >= 0.25]
        started = time.perf_counter()
        topology.preferred(available, [], 8, units)
        times.append(time.perf_counter() - started)
    return (
        f"allocator {name:<34} n={samples:>5}  p50 {fmt(statistics.median(times))}"
        f"  p99 {fmt(percentile(times, 99))}"
    )


def random_request(rng: random.Random, cards: int) -> tuple[Topology, CardRequest, list[str], list[str], int]:
    node = [Card(f"c{i}", "bench", "bench", "bench", i, numa_node=rng.choice([0, 1])) for i in range(cards)]
    pairs = [(a.id, b.id, link) for a, b in combinations(node, 2) for link in rng.choice(LINK_CHOICES)]
    topology = Topology.build(node, LinkMatrix.from_pairs(pairs))
    size = rng.randrange(2, 7)
    available = [c.id for c in node if rng.random() < 0.85]
    while len(available) < size:
        available.append(next(c.id for c in node if c.id not in available))
    must = rng.sample(available, k=rng.choice([0, 0, 1]))
    fixed = tuple(topology.position[c] for c in must)
    candidates = tuple(sorted(topology.position[c] for c in available if c not in must))
    return topology, CardRequest(fixed, candidates, size - len(must)), available, must, size


def quality(topologies: int, rng: random.Random) -> list[str]:
    ratios: dict[str, tuple[list[float], list[float]]] = {
        "chosen": ([], []),
        "greedy+repair": ([], []),
        "plain greedy": ([], []),
    }
    for _ in range(topologies):
        topology, request, available, must, size = random_request(rng, 8)
        objective = Objective(topology, request)
        units = {c: Unit(c, c, "bench") for c in topology.position}
        chosen = topology.preferred(available, must, size, units)
        optimum = max(combinations(objective.candidates, request.count), key=objective.key)
        picks: dict[str, Sequence[int]] = {
            "chosen": [topology.position[c] for c in chosen if c not in must],
            "greedy+repair": improved(objective, request.count),
            "plain greedy": greedy_baseline(objective, request.count),
        }
        best = objective.prefix(sorted(optimum))
        for name, pick in picks.items():
            got = objective.prefix(sorted(pick))
            ratios[name][0].append(_ratio(got[4], best[4]))
            ratios[name][1].append(_ratio(got[5], best[5]))
    lines = []
    for name, (weakest, total) in ratios.items():
        lines.append(
            f"allocator quality {name:<14} vs optimum, {topologies} random 8-card nodes: weakest pair"
            f" mean {statistics.fmean(weakest):.4f} min {min(weakest):.3f}; sum mean"
            f" {statistics.fmean(total):.4f} min {min(total):.3f}"
        )
    return lines


def _ratio(got: int, best: int) -> float:
    return 1.0 if best == 0 else got / best


def run(samples: int = 300, topologies: int = 1000, seed: int = 7) -> list[str]:
    """Bench lines: latency p50/p99 per shape, then quality ratios (1.0 = the exhaustive optimum)."""
    rng = random.Random(seed)
    return [
        latency("8 of 64 cards", 64, 1, samples, rng),
        latency("8 of 512 replicas (64 cards x 8)", 64, 8, samples, rng),
        latency("8 of 512 cards", 512, 1, max(20, samples // 5), rng),
        *quality(topologies, rng),
    ]


if __name__ == "__main__":
    print("\n".join(run()))
