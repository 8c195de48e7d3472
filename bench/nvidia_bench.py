"""NVIDIA backend timings on the fake libnvidia-ml through the real pynvml.

Discovery of an 8-card NVLink node and of the same node with 8 x 7 MIG devices, and a critical Xid
→ Unhealthy at the kubelet simulator through the whole daemon. The fake polls its control file every
5 ms while ``nvmlEventSetWait_v2`` blocks, so about 2.5 ms of the Xid latency is the fake's own; a
real driver delivers the event when it happens.
"""

from __future__ import annotations

import os
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
from vendors.nvidia import create_backend
from vendors.nvidia.fake.node import dgx_h100_node, h100_mig, mig_instance
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

WAIT = 10.0


def mig_everywhere(node: dict[str, Any]) -> dict[str, Any]:
    for gpu in node["gpus"]:
        gpu["mig"] = h100_mig(1, [mig_instance("1g.10gb") for _ in range(7)])
    return node


def _backend_config(fake: FakeNvidiaNode, stop: threading.Event) -> BackendConfig:
    os.environ.update(fake.env)
    options = {**fake.backend_options, "recoverySeconds": "0.05", "healthWaitMs": "50"}
    return BackendConfig(host_root=fake.host_root, options=options, stop=stop)


def bench_discovery(root: Path, name: str, node: dict[str, Any], rounds: int) -> Result:
    fake = prepare_fake_node(root / name, node, build_dir=root / "build")
    backend = create_backend(_backend_config(fake, threading.Event()))
    try:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            inventory = backend.discover()
            samples.append(time.perf_counter() - start)
        what = f"{len(inventory.cards)} cards, {len(inventory.partitions)} MIG devices"
    finally:
        backend.close()
    return Result(f"NVIDIA discover(): {what}", samples)


def bench_xid(root: Path, rounds: int) -> Result:
    fake = prepare_fake_node(root / "xid", dgx_h100_node(), build_dir=root / "build")
    stop = threading.Event()
    backend = create_backend(_backend_config(fake, stop))
    cards = [c.id for c in backend.discover().cards]
    pools = "version: v1\npools:\n  - name: nv\n    devices:\n" + "".join(
        f"      - uuid: {c}\n" for c in cards
    )
    write_configmap_volume(root / "pools", {"pools.yaml": pools})
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    daemon = Daemon(DaemonConfig(plugin_dir=root / "dp", node_name="bench"), {backend.name: backend})
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    resource = "gpu.deckhouse.io/nv"
    seen = threading.Condition()
    arrivals: list[tuple[float, bool]] = []

    def listener(name: str, devices: list[Any], at: float) -> None:
        with seen:
            arrivals.append((at, any(cards[0] == d.ID and d.health != "Healthy" for d in devices)))
            seen.notify_all()

    kubelet.add_snapshot_listener(listener)
    daemon.start()
    samples = []
    try:
        kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(cards), WAIT, "up")
        for _ in range(rounds):
            start = time.monotonic()
            fake.control.xid(cards[0], 79)

            def down(s: float = start) -> bool:
                return any(t >= s and bad for t, bad in arrivals)

            with seen:
                if not seen.wait_for(down, WAIT):
                    raise TimeoutError("Xid never reached the kubelet simulator")
                samples.append(next(t for t, bad in arrivals if t >= start and bad) - start)
                arrivals.clear()
            kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(cards), WAIT, "recovered")
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
    return Result("NVIDIA Xid 79 -> Unhealthy at kubelet (fake NVML)", samples)


def run(rounds: int = 50) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="hcsnb", dir="/tmp"))
    try:
        results = [
            bench_discovery(root, "dgx", dgx_h100_node(), rounds),
            bench_discovery(root, "dgx-mig", mig_everywhere(dgx_h100_node()), rounds),
            bench_xid(root, max(10, rounds // 2)),
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [r.line() for r in results]


if __name__ == "__main__":
    print("\n".join(run()))
