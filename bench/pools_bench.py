"""Pool config at cluster scale: parse + merge + reconcile diff for 1,000 pools on a 16-card node.

Four measurements, each from text to the reconciler's plan (``desired_state`` + ``plan_changes``),
which is what a ConfigMap change costs the daemon before any gRPC happens:

* **native, 1,000 pools in one ConfigMap** (cluster-wide: 16 of them name this node's cards, the
  rest other nodes'). Each sample changes one pool, so the whole document is parsed again, as the
  aggregator must: the object changed. Its entries written as in the sample before are not checked
  again (``pools/reuse.py``), as in the daemon, whose previous parse of the source is the version
  before: two entries differ from it per sample (the pool changed now and the one changed before).
* **native, the same with no previous parse** (a new source, or the daemon's first read): every
  entry is checked.
* **DKP, 1,000 per-pool ConfigMaps, one changes** (the control plane's layout): the aggregator gets
  the complete list, re-parses only the changed object and re-merges.
* **DKP, 1,000 per-pool ConfigMaps, cold** (start-up, or a re-list after the watch expired with
  everything new): every object is parsed.

The ConfigMap objects are built before the clock starts, as a watch hands them over. Each is
timed by the wall clock and by the CPU time of the thread doing it (``time.thread_time``):
the work is single-threaded, so on a machine shared with other jobs the CPU time is the steadier
figure of the two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from bench.common import Result, headline, short
from hcs_deviceplugin.model import Card, Inventory, PoolSet
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.formats import parse_configmap, parse_configmap_located
from hcs_deviceplugin.pools.native import LAST_PARSE
from hcs_deviceplugin.pools.objects import ConfigMapObject
from hcs_deviceplugin.reconciler import DesiredPool, desired_state, plan_changes

NODE = "k8s-w1"
POOLS = 1000
CARDS = 16
NAMESPACE = "d8-gpu-control-plane"
NO_ENV: Mapping[str, str] = {}


def uuid(n: int) -> str:
    return f"GPU-{n:08x}-1111-2222-3333-{n:012x}"


def inventory() -> Inventory:
    cards = tuple(
        Card(uuid(n), "nvidia", "nvidia", "H100", n, f"0000:{n + 0x17:02x}:00.0", 0x10DE, 0x2330, n // 8)
        for n in range(CARDS)
    )
    return Inventory(cards=cards)


def native_configmap(changed: int, slices: int) -> ConfigMapObject:
    lines = ["version: v1", "pools:"]
    for n in range(POOLS):
        lines.append(f"  - name: pool-{n:04d}")
        lines.append(f"    slicesPerUnit: {slices if n == changed else 1 + n % 4}")
        lines.append(f"    devices: [{{uuid: {uuid(n)}}}]")
    return ConfigMapObject(
        "hcs-deviceplugin-pools", NAMESPACE, {"pools.yaml": "\n".join(lines) + "\n"}, source="configmap pools"
    )


def dkp_configmap(n: int, replicas: int) -> ConfigMapObject:
    name = f"pool-{n:04d}"
    text = (
        "flags: {migStrategy: none, resourcePrefix: gpu.deckhouse.io}\n"
        "plugin: {deviceIDStrategy: uuid, deviceListStrategy: envvar, passDeviceSpecs: true}\n"
        f"resources:\n  gpus:\n  - {{name: gpu.deckhouse.io/{name}, pattern: {uuid(n)}}}\n"
        "sharing:\n  timeSlicing:\n    resources:\n"
        f"    - {{name: gpu.deckhouse.io/{name}, replicas: {replicas}}}\n"
        "version: v1\n"
    )
    return ConfigMapObject(
        f"nvidia-device-plugin-{name}-config",
        NAMESPACE,
        {"config.yaml": text},
        {"app": "nvidia-device-plugin", "pool": name},
        "1",
        f"configmap {NAMESPACE}/nvidia-device-plugin-{name}-config",
    )


def diff(pools: PoolSet, inv: Inventory, running: Mapping[str, DesiredPool]) -> Mapping[str, DesiredPool]:
    desired = desired_state(pools, inv, NODE).pools
    plan_changes(running, desired)
    return desired


def timed(samples: int, step: Callable[[int], None]) -> tuple[list[float], list[float]]:
    """Wall-clock and thread CPU seconds of each of ``samples`` steps."""
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(samples):
        start, start_cpu = time.perf_counter(), time.thread_time()
        step(i)
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    return wall, cpu


def results(name: str, samples: tuple[list[float], list[float]]) -> tuple[Result, Result]:
    return Result(name, samples[0]), Result("  the same, CPU time of its thread", samples[1])


def bench_native(samples: int) -> tuple[Result, Result]:
    inv = inventory()
    running = diff(PoolSet(tuple(parse_configmap(native_configmap(-1, 1)))), inv, {})

    changed = [native_configmap(i % POOLS, 8 + i % 2) for i in range(samples)]  # as a watch delivers them

    def step(i: int) -> None:
        nonlocal running
        pools = PoolSet(tuple(parse_configmap(changed[i])))
        running = diff(pools, inv, running)

    return results(f"native: {POOLS} pools in 1 ConfigMap, 1 changes", timed(samples, step))


def bench_native_cold(samples: int) -> tuple[Result, Result]:
    """The same document with nothing remembered from a previous parse: every entry checked."""
    inv = inventory()
    running = diff(PoolSet(tuple(parse_configmap(native_configmap(-1, 1)))), inv, {})
    changed = [native_configmap(i % POOLS, 8 + i % 2) for i in range(samples)]

    def step(i: int) -> None:
        nonlocal running
        LAST_PARSE.forget()
        pools = PoolSet(tuple(parse_configmap(changed[i])))
        running = diff(pools, inv, running)

    return results(f"native: {POOLS} pools in 1 ConfigMap, no previous parse", timed(samples, step))


def bench_dkp_incremental(samples: int) -> tuple[Result, Result]:
    inv = inventory()
    objects = [dkp_configmap(n, 1 + n % 4) for n in range(POOLS)]
    aggregator = PoolAggregator(
        lambda pools, errors: None, parser=lambda o: parse_configmap_located(o, NO_ENV)
    )
    running = diff(aggregator.update("api", objects)[0], inv, {})

    changed = [
        replace(dkp_configmap((i * 37) % POOLS, 5 + i % 2), resource_version=str(2 + i))
        for i in range(samples)
    ]

    def step(i: int) -> None:
        nonlocal running
        objects[(i * 37) % POOLS] = changed[i]
        running = diff(aggregator.update("api", objects)[0], inv, running)

    return results(f"dkp: {POOLS} per-pool ConfigMaps, 1 changes", timed(samples, step))


def bench_dkp_cold(samples: int) -> tuple[Result, Result]:
    inv = inventory()

    listed = [[dkp_configmap(n, 1 + (n + i) % 4) for n in range(POOLS)] for i in range(samples)]

    def step(i: int) -> None:
        objects = listed[i]
        aggregator = PoolAggregator(
            lambda pools, errors: None, parser=lambda o: parse_configmap_located(o, NO_ENV)
        )
        diff(aggregator.update("api", objects)[0], inv, {})

    return results(f"dkp: {POOLS} per-pool ConfigMaps, cold", timed(samples, step))


def run(samples: int = 20) -> list[str]:
    """Two lines per measurement (wall, CPU), as ``python -m bench --only pools`` prints them."""
    native = bench_native(samples)
    native_cold = bench_native_cold(samples)
    incremental = bench_dkp_incremental(samples * 5)
    cold = bench_dkp_cold(max(5, samples // 4))
    for (wall, cpu), what, target in (
        (native, f"pools: native, {POOLS} pools in 1 ConfigMap, parse + diff", "target ≤ 50 ms"),
        (native_cold, f"pools: native, {POOLS} pools, no previous parse to reuse", "target ≤ 50 ms"),
        (incremental, f"pools: DKP, {POOLS} ConfigMaps, one changes", ""),
        (cold, f"pools: DKP, {POOLS} ConfigMaps, cold", "target ≤ 300 ms"),
    ):
        headline(f"{what} (median wall, CPU)", f"{short(wall.median)}, {short(cpu.median)}", target)
    return [r.line() for pair in (native, native_cold, incremental, cold) for r in pair]


if __name__ == "__main__":
    for line in run():
        print(line)
