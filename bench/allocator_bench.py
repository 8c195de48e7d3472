"""Allocator latency on large nodes and choice quality against the exhaustive optimum.

Latency: ``Topology.preferred`` on a precomputed topology and the pool's units as its snapshot keeps
them (:class:`~hcs_deviceplugin.allocation.units.PoolUnits`: what a pool does per request),
in-process and over the socket: a real PluginServer serving the node's units in a process of its own (as
beside kubelet), GetPreferredAllocation against a no-op call
(GetDevicePluginOptions) on the same socket, the two interleaved. Nodes are NVLink
islands of 8 GPUs made of PCIe switch pairs under host bridges, two islands per NUMA node
(``tests/allocator/islands.py``). Cases, each 8 units per request: ``8 of 64 cards``, ``8 of 128
cards``, ``8 of 512 units (64 cards x 8 slices)``, ``8 of 512 units (8 cards x 64 slices)`` and
``8 of 512 cards`` (the last in-process only). Every sample holds a different random quarter
of the node, so no two requests are alike. The floor is kubelet's own
order (the first ids offered), what the plugin answers when the allocator fails; the ratio is the
median over it. ``cpu p99`` is the same request's thread CPU time: on a shared machine the wall
clock p99 is mostly time spent waiting for a core, which this separates out.

Quality: on 1,000 random 8-card topologies (every link kind, random NUMA, random free cards and
must-include, sizes 2-6) the weakest-pair score of the set chosen, over that of the exhaustive
optimum of the same objective; also the sum of pair scores, and the same ratios for the greedy
search forced on the same inputs and for plain greedy, to show what the exact search buys. Then, on
64-, 96- and 128-card island nodes with a random quarter held, how many 8-card answers differ in
key from the independent reference of ``tests/allocator/islands.py`` (the chosen answer, and the
greedy search forced on the same request, in the whole key and in the weakest pair: 7 cards in one
island plus one across PCIe is a weakest-pair miss).
"""

from __future__ import annotations

import gc
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

import grpc

from bench.common import fmt, percentile
from hcs_deviceplugin.allocation import Topology
from hcs_deviceplugin.allocation.select import CardRequest, Objective, greedy_baseline, improved
from hcs_deviceplugin.allocation.units import PoolUnits
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit
from tests.allocator.islands import island_node, positions, reference

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


def latency(name: str, cards: int, slices: int, samples: int, rng: random.Random) -> str:
    node = island_node(cards)
    topology = Topology.build(node.cards, node.links)
    units = PoolUnits(node.whole() if slices == 1 else node.replicas(slices))  # as a pool's snapshot
    ids = list(units)
    topology.preferred(ids, [], 8, units)  # the per-topology precomputation, done once per pool
    times: list[float] = []
    cpu: list[float] = []
    floor: list[float] = []
    for _ in range(samples):
        available = [u for u in ids if rng.random() >= 0.25]
        started, started_cpu = time.perf_counter(), time.thread_time()
        topology.preferred(available, [], 8, units)
        cpu.append(time.thread_time() - started_cpu)
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        _kubelet_order(available, [], 8)
        floor.append(time.perf_counter() - started)
    median = statistics.median(times)
    return (
        f"allocator {name:<38} n={samples:>5}  median {fmt(median)}  p99 {fmt(percentile(times, 99))}"
        f"  (cpu p99 {fmt(percentile(cpu, 99))})  {median / statistics.median(floor):8.1f}x kubelet's order"
    )


def socket_latency(name: str, cards: int, slices: int, samples: int, rng: random.Random) -> str:
    """The same request as :func:`latency`, asked of a real pool server over its unix socket.

    The server runs in a process of its own (:mod:`bench.allocator_server`), as it does beside
    kubelet: a client in the server's process would make every send wait for the client's thread.
    """
    node = island_node(cards)
    units = node.whole() if slices == 1 else node.replicas(slices)
    ids = list(units)
    root = Path(tempfile.mkdtemp(prefix="hcsa", dir="/tmp"))
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.allocator_server", str(cards), str(slices), str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        socket_path = child.stdout.readline().strip()
        if not socket_path:
            raise RuntimeError(f"the pool server for {name} did not start")
        with grpc.insecure_channel(f"unix:{socket_path}") as channel:
            stub = pb_grpc.DevicePluginStub(channel)
            grpc.channel_ready_future(channel).result(timeout=10)

            def ask(available: list[str]) -> pb.PreferredAllocationRequest:
                return pb.PreferredAllocationRequest(
                    container_requests=[
                        pb.ContainerPreferredAllocationRequest(
                            available_deviceIDs=available, allocation_size=8
                        )
                    ]
                )

            stub.GetPreferredAllocation(ask(ids), timeout=10)  # the first request builds the tables
            times: list[float] = []
            floor: list[float] = []
            gc.collect()  # the client stands in for kubelet, whose collector is not ours: keep
            gc.disable()  # this process's passes out of the timed calls, as timeit does
            try:
                for _ in range(samples):
                    request = ask([u for u in ids if rng.random() >= 0.25])
                    started = time.perf_counter()
                    stub.GetDevicePluginOptions(pb.Empty(), timeout=10)
                    floor.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    answer = stub.GetPreferredAllocation(request, timeout=10)
                    times.append(time.perf_counter() - started)
                    assert len(answer.container_responses[0].deviceIDs) == 8
            finally:
                gc.enable()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    above = [t - f for t, f in zip(times, floor, strict=True)]
    return (
        f"allocator over the socket {name:<26} n={samples:>5}  median {fmt(statistics.median(times))}"
        f"  p99 {fmt(percentile(times, 99))}  (above the no-op floor: median {fmt(statistics.median(above))}"
        f", p99 {fmt(percentile(above, 99))})"
    )


def _kubelet_order(available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
    """The plugin's answer when the allocator fails: must-include, then kubelet's own order."""
    chosen = list(dict.fromkeys(must))[:size]
    return chosen + [u for u in dict.fromkeys(available) if u not in chosen][: size - len(chosen)]


def island_quality(cards: int, trials: int, rng: random.Random) -> str:
    """8-card answers on an island node whose key differs from the exhaustive reference."""
    node = island_node(cards)
    topology = Topology.build(node.cards, node.links)
    units = node.whole()
    chosen_off = forced_off = forced_links_off = compared = 0
    for _ in range(trials):
        available = [c for c in node.ids if rng.random() >= 0.25]
        candidates = tuple(sorted(topology.position[c] for c in available))
        objective = Objective(topology, CardRequest((), candidates, 8))
        best = reference(objective, min(8, len(candidates)), positions(objective, node))
        if best is None:
            continue
        compared += 1
        chosen = sorted(topology.position[c] for c in topology.preferred(available, [], 8, units))
        chosen_off += objective.key(chosen) != objective.key(best)
        forced = improved(objective, 8)
        forced_off += objective.key(forced) != objective.key(best)
        forced_links_off += objective.prefix(forced)[:5] != objective.prefix(best)[:5]
    return (
        f"allocator quality {cards}-card island node, 8 of a random 3/4 free: differs from the"
        f" exhaustive reference in {chosen_off}/{compared} answers (greedy search forced:"
        f" {forced_off}/{compared}, in its weakest pair {forced_links_off}/{compared})"
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
        latency("8 of 128 cards", 128, 1, samples, rng),
        latency("8 of 512 units (64 cards x 8 slices)", 64, 8, samples, rng),
        latency("8 of 512 units (8 cards x 64 slices)", 8, 64, samples, rng),
        latency("8 of 512 cards", 512, 1, max(20, samples // 5), rng),
        socket_latency("8 of 64 cards", 64, 1, samples, rng),
        socket_latency("8 of 128 cards", 128, 1, samples, rng),
        socket_latency("8 of 512 units (64 x 8)", 64, 8, samples, rng),
        socket_latency("8 of 512 units (8 x 64)", 8, 64, samples, rng),
        *quality(topologies, rng),
        *(island_quality(cards, trials, rng) for cards, trials in ((64, 1000), (96, 300), (128, 300))),
    ]


if __name__ == "__main__":
    print("\n".join(run()))
