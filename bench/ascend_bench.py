"""Ascend backend timings on the fake libdcmi through the real ctypes code.

- ``discover()`` of an 8-chip 910B node and a 16-die A3 node (every chip read on its own worker, the
  HCCS pair query answered from the cache after the first pass, as in a running daemon);
- the cost of one chip's health poll: the bare ctypes call, and the round trip through the chip's
  worker thread that bounds it (what the monitor pays per chip and interval);
- a critical health value → Unhealthy at the kubelet simulator through the whole daemon, with the poll
  interval at 50 ms and the fault injected at a random phase of the cycle: the latency is about half an
  interval plus the path to kubelet, so it says how little the path adds on top of the interval, not
  what a 5 s production interval gives (about 2.5 s on average, 5 s at worst).
- The fake answers VDEV_MNG/GET_TOTAL_RESOURCE in about 0.5 ms (it scans every possible vNPU id under
  its one mutex), which is most of the discovery time below; the real driver's cost is unknown.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import Result
from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.ascend import AscendBackend, calls, create_backend
from vendors.ascend.discovery import ChipAddress
from vendors.ascend.fake import FakeAscendNode, node_910b, node_a3, prepare_fake_ascend_node
from vendors.ascend.health import poll_chip
from vendors.ascend.timeouts import CallBounds

WAIT = 10.0
INTERVAL = "0.05"


def _backend(fake: FakeAscendNode, stop: threading.Event | None = None) -> AscendBackend:
    os.environ.update(fake.env)
    options = {**fake.backend_options, "healthIntervalSeconds": INTERVAL, "callTimeoutSeconds": "2"}
    return create_backend(
        BackendConfig(host_root=fake.host_root, options=options, stop=stop or threading.Event())
    )


def bench_discovery(root: Path, name: str, node: dict[str, Any], rounds: int) -> Result:
    fake = prepare_fake_ascend_node(root / name, node, build_dir=root / "build")
    backend = _backend(fake)
    try:
        backend.discover()  # first pass also asks DCMI for the HCCS pairs
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            inventory = backend.discover()
            samples.append(time.perf_counter() - start)
    finally:
        backend.close()
    return Result(f"Ascend discover(): {len(inventory.cards)} chips ({name})", samples)


def bench_poll(root: Path, rounds: int) -> list[Result]:
    fake = prepare_fake_ascend_node(root / "poll", node_a3(8), build_dir=root / "build")
    backend = _backend(fake)
    bounds = CallBounds(2.0)
    try:
        chips = [ChipAddress.of(c) for c in backend.discover().cards]
        direct, worker = [], []
        for n in range(rounds):
            chip = chips[n % len(chips)]
            start = time.perf_counter()
            calls.health(backend.library, chip.card_id, chip.device_id)
            direct.append(time.perf_counter() - start)
            start = time.perf_counter()
            bounds.run(chip.key, lambda c=chip: poll_chip(backend.library, c.card_id, c.device_id))  # type: ignore[misc]
            worker.append(time.perf_counter() - start)
    finally:
        bounds.close()
        backend.close()
    return [
        Result("Ascend health poll per chip: ctypes call only", direct),
        Result("Ascend health poll per chip: via its bounded worker", worker),
    ]


def bench_fault_latency(root: Path, rounds: int) -> Result:
    fake = prepare_fake_ascend_node(root / "fault", node_910b(8), build_dir=root / "build")
    stop = threading.Event()
    backend = _backend(fake, stop)
    chips = sorted(backend.discover().cards, key=lambda c: c.index)
    pools = "version: v1\npools:\n  - name: npu\n    devices:\n" + "".join(
        f"      - uuid: {c.id}\n" for c in chips
    )
    write_configmap_volume(root / "pools", {"pools.yaml": pools})
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    daemon = Daemon(DaemonConfig(plugin_dir=root / "dp", node_name="bench"), {backend.name: backend})
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    resource = "gpu.deckhouse.io/npu"
    seen = threading.Condition()
    arrivals: list[tuple[float, bool]] = []

    def listener(name: str, devices: list[Any], at: float) -> None:
        with seen:
            arrivals.append((at, any(chips[0].id == d.ID and d.health != "Healthy" for d in devices)))
            seen.notify_all()

    kubelet.add_snapshot_listener(listener)
    daemon.start()
    samples = []
    try:
        kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(chips), WAIT, "up")
        for _ in range(rounds):
            time.sleep(random.uniform(0, float(INTERVAL)))  # a fault comes at any phase of the poll cycle
            start = time.monotonic()
            fake.control.set_health(0, 3)

            def down(s: float = start) -> bool:
                return any(t >= s and bad for t, bad in arrivals)

            with seen:
                if not seen.wait_for(down, WAIT):
                    raise TimeoutError("health fault never reached the kubelet simulator")
                samples.append(next(t for t, bad in arrivals if t >= start and bad) - start)
                arrivals.clear()
            fake.control.set_health(0, 0)
            kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(chips), WAIT, "recovered")
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
    return Result(f"Ascend health 3 -> Unhealthy at kubelet (poll {INTERVAL}s)", samples)


def run(rounds: int = 50) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="hcsab", dir="/tmp"))
    saved = os.environ.copy()
    try:
        results = [
            bench_discovery(root, "910B x8", node_910b(8), rounds),
            bench_discovery(root, "A3 x16", node_a3(8), rounds),
            *bench_poll(root, rounds * 20),
            bench_fault_latency(root, max(10, rounds // 2)),
        ]
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)
    return [r.line() for r in results]


if __name__ == "__main__":
    print("\n".join(run()))
