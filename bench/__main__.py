"""``python -m bench``: latency of the daemon's hot paths, against a floor measured in the same run.

Everything runs for real on this machine: the daemon on the simulated backend, the kubelet
simulator, gRPC over unix sockets, the pools volume with kubelet's ``..data`` swap. Each line gives
the median and p99 of many samples and, for gRPC calls, the ratio to a no-op call
(GetDevicePluginOptions) on the same socket, so the numbers compare across machines.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import yaml

from bench.common import HEADLINES, Result, headline, interleaved, markdown_table, short
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.model import Health, HealthEvent
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.simulated import SimulatedBackend, create_backend

NODE = "builtin:eight-gpu-nvlink"
MODULE_GROUPS = (
    "nvidia",
    "hygon",
    "cambricon",
    "ascend",
    "allocator",
    "pools",
    "cdi",
    "dra",
    "api",
    "wire",
    "start",
    "footprint",
    "metrics",
    "hostile_pools",
    "reliability",
)
"""Groups living in ``bench/<group>_bench.py``, each exposing ``run() -> list[str]``."""
LONG_GROUPS = ("reliability",)
"""Left out of the default run (a 10-minute soak among them): ask for them with ``--only``."""
WAIT = 10.0


def pools_doc(pools: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({"version": "v1", "pools": pools}, sort_keys=False)


@contextmanager
def node(pool_text: str) -> Iterator[tuple[Path, KubeletSimulator, SimulatedBackend, Daemon]]:
    """The daemon as ``run`` wires it, pod-resources poller included, beside the kubelet simulator."""
    root = Path(tempfile.mkdtemp(prefix="hcsb", dir="/tmp"))
    stop = threading.Event()
    backend = create_backend(BackendConfig(options={"node": NODE}, stop=stop))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    write_configmap_volume(root / "pools", {"pools.yaml": pool_text})
    config = DaemonConfig(plugin_dir=root / "dp", node_name="bench", pod_resources_socket=root / "pr.sock")
    daemon = Daemon(config, {backend.name: backend})
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    daemon.start()
    try:
        yield root, kubelet, backend, daemon
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def time_calls(call: Callable[[], object], count: int) -> list[float]:
    for _ in range(min(100, count)):
        call()  # warm up connection and caches
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


@contextmanager
def grpcio_reference(path: Path) -> Iterator[pb_grpc.DevicePluginStub]:
    """A grpcio server (C core, thread pool) answering the no-op call on ``path``, and a stub to it."""
    options = pb.DevicePluginOptions(get_preferred_allocation_available=True)
    handler = grpc.unary_unary_rpc_method_handler(
        lambda _request, _context: options,
        request_deserializer=pb.Empty.FromString,
        response_serializer=pb.DevicePluginOptions.SerializeToString,
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", {"GetDevicePluginOptions": handler})]
    )
    server.add_insecure_port(f"unix:{path}")
    server.start()
    channel = grpc.insecure_channel(f"unix:{path}")
    try:
        yield pb_grpc.DevicePluginStub(channel)
    finally:
        channel.close()
        server.stop(0)


def bench_grpc(calls: int) -> list[Result]:
    cards = [c.id for c in create_backend(BackendConfig(options={"node": NODE})).discover().cards]
    text = pools_doc([{"name": "bench", "devices": [{"uuid": c} for c in cards]}])
    with node(text) as (root, kubelet, _backend, _daemon):
        kubelet.wait_for(lambda k: k.resource("gpu.deckhouse.io/bench").connected, WAIT, "streaming")
        channel = grpc.insecure_channel(f"unix:{root / 'dp' / 'hcs-gpu.deckhouse.io_bench.sock'}")
        stub = pb_grpc.DevicePluginStub(channel)
        one = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=cards[:1])])
        eight = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=cards[:8])])
        preferred = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(available_deviceIDs=cards, allocation_size=4)
            ]
        )
        floor_samples, one_samples, eight_samples = interleaved(
            [
                lambda: stub.GetDevicePluginOptions(pb.Empty()),
                lambda: stub.Allocate(one),
                lambda: stub.Allocate(eight),
            ],
            calls,
        )
        # Apart from the Allocate figures: a call that follows one to grpcio's server pays for that
        # server's threads finishing, which would bend the floor the Allocate figures are held to.
        with grpcio_reference(root / "grpcio.sock") as reference:
            _ours, grpcio_samples = interleaved(
                [
                    lambda: stub.GetDevicePluginOptions(pb.Empty()),
                    lambda: reference.GetDevicePluginOptions(pb.Empty()),
                ],
                calls,
            )
        floor = statistics.median(floor_samples)
        results = [
            Result("no-op gRPC (GetDevicePluginOptions): floor", floor_samples, floor),
            Result("Allocate, 1 unit", one_samples, floor),
            Result("Allocate, 8 units", eight_samples, floor),
            Result("reference: the no-op on a grpcio server, same client", grpcio_samples, floor),
            Result(
                "GetPreferredAllocation, 4 of 8",
                time_calls(lambda: stub.GetPreferredAllocation(preferred), calls),
                floor,
            ),
        ]
        channel.close()
        headline("no-op gRPC call (in-process bench)", short(floor), "floor")
        headline(
            "the same no-op call on grpcio's own server (C core), same client",
            short(results[3].median),
            f"ours beside it {short(statistics.median(_ours))}: "
            f"{statistics.median(_ours) / results[3].median:.2f}x grpcio's",
        )
        for result in results[1:3]:
            headline(
                f"{result.name}: median above the floor (p99)",
                f"{short(result.median - floor)} ({short(result.p99)})",
                f"{result.median / floor:.2f}x floor; target ≤ 20 µs above",
            )
        return results


def bench_health(rounds: int) -> Result:
    cards = [c.id for c in create_backend(BackendConfig(options={"node": NODE})).discover().cards]
    text = pools_doc([{"name": "bench", "devices": [{"uuid": c} for c in cards]}])
    with node(text) as (_root, kubelet, backend, _daemon):
        kubelet.wait_for(lambda k: k.resource("gpu.deckhouse.io/bench").connected, WAIT, "streaming")
        seen = threading.Condition()
        arrivals: list[tuple[float, frozenset[str]]] = []

        def listener(resource: str, devices: list[pb.Device], at: float) -> None:
            with seen:
                arrivals.append((at, frozenset(d.ID for d in devices if d.health != "Healthy")))
                seen.notify_all()

        kubelet.add_snapshot_listener(listener)
        samples = []
        for i in range(rounds):
            health = Health.UNHEALTHY if i % 2 == 0 else Health.HEALTHY
            want = frozenset({cards[0]}) if health is Health.UNHEALTHY else frozenset()
            start = time.monotonic()
            backend.inject(HealthEvent(cards[0], health, "bench"))

            def arrived(w: frozenset[str] = want, s: float = start) -> bool:
                return any(t >= s and u == w for t, u in arrivals)

            with seen:
                if not seen.wait_for(arrived, WAIT):
                    raise TimeoutError("health change never reached the kubelet simulator")
                arrival = next(t for t, u in arrivals if t >= start and u == want)
                arrivals.clear()
            samples.append(arrival - start)
        return Result("health event -> ListAndWatch at kubelet", samples)


def bench_pool_change(rounds: int) -> Result:
    cards = [c.id for c in create_backend(BackendConfig(options={"node": NODE})).discover().cards]
    docs = [
        pools_doc([{"name": "bench", "devices": [{"uuid": c} for c in cards[: 4 + i % 2]]}]) for i in range(2)
    ]
    with node(docs[0]) as (root, kubelet, _backend, _daemon):
        resource = "gpu.deckhouse.io/bench"
        kubelet.wait_for(lambda k: resource in k.resources() and k.resource(resource).connected, WAIT, "up")
        samples = []
        for i in range(1, rounds + 1):
            want = 4 + i % 2
            start = time.monotonic()
            write_configmap_volume(root / "pools", {"pools.yaml": docs[i % 2]})

            def applied(k: KubeletSimulator, w: int = want) -> bool:
                return len(k.resource(resource).healthy) == w

            kubelet.wait_for(applied, WAIT, "pool change")
            samples.append(time.monotonic() - start)
        return Result("pool file (..data swap) -> ListAndWatch", samples)


def bench_start(rounds: int, pools: int) -> Result:
    cards = [c.id for c in create_backend(BackendConfig(options={"node": NODE})).discover().cards]
    text = pools_doc([{"name": f"p{i}", "devices": [{"uuid": cards[i]}]} for i in range(pools)])
    names = {f"gpu.deckhouse.io/p{i}" for i in range(pools)}
    samples = []
    for _ in range(rounds):
        start = time.monotonic()
        with node(text) as (_root, kubelet, _backend, _daemon):
            kubelet.wait_for(
                lambda k: all(n in k.resources() and k.resource(n).connected for n in names), WAIT, "all up"
            )
            samples.append(time.monotonic() - start)
    return Result(f"start -> all {pools} pools registered + streaming", samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="gRPC calls per measurement (>= 1000)")
    parser.add_argument("--rounds", type=int, default=200, help="health and pool-change rounds")
    parser.add_argument(
        "--only",
        default=",".join(("core", *(g for g in MODULE_GROUPS if g not in LONG_GROUPS))),
        help=f"comma-separated groups to run: core, {', '.join(MODULE_GROUPS)}",
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="end with the headline figures as a Markdown table (README's Performance section)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    groups = {g.strip() for g in args.only.split(",")}
    print(f"hcs-deviceplugin bench: simulated node {NODE}, {args.calls} calls, {args.rounds} rounds")
    print(f"{'measurement':<52} {'':>7}  {'':>15}  {'':>15}  vs floor")
    if "core" in groups:
        for result in bench_grpc(args.calls):
            print(result.line(), flush=True)
            if result.floor is not None and result.name.startswith("Allocate"):
                print(result.overhead_line(), flush=True)
        print(bench_health(args.rounds).line(), flush=True)
        print(bench_pool_change(max(20, args.rounds // 4)).line(), flush=True)
        print(bench_start(max(10, args.rounds // 20), 8).line(), flush=True)
    for group in MODULE_GROUPS:
        if group in groups:
            module = importlib.import_module(f"bench.{group}_bench")
            for line in module.run():
                print(line, flush=True)
    if args.markdown:
        print()
        print(markdown_table(HEADLINES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
