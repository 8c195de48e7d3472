"""Cambricon backend timings on generated MLU host trees (sysfs, procfs, /dev under a temp root).

Discovery of the 8-MLU MLU-Link node (four MLU370-X8 boards, with the topology file) and of a 64-MLU
PCIe node, and hot-removal of a card → Unhealthy at the kubelet simulator through the whole daemon.
The host root is a test tree, so udev is off and the health loop wakes on its bounded re-scan only:
the removal latency is bounded by the re-scan interval (half of it on average: each removal happens
at a random point of the cycle) plus the check of every card and the daemon's path to ListAndWatch.
On a node with udev a PCI remove event wakes the loop at once; a ``core_state`` change in procfs is
seen on the re-scan either way.
"""

from __future__ import annotations

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
from vendors.cambricon import create_backend
from vendors.cambricon.fake.tree import NodeSpec, mlulink_node, pcie_node, write_cambricon_node

WAIT = 10.0


def bench_discovery(root: Path, name: str, spec: NodeSpec, rounds: int) -> Result:
    node = write_cambricon_node(root / name, spec)
    options = {"udev": "off"}
    if node.link_file is not None:
        options["mluLinkFile"] = str(node.link_file)
    backend = create_backend(BackendConfig(host_root=node.host_root, options=options))
    backend.discover()  # the first call also fills the known-card table; time the steady state
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        inventory = backend.discover()
        samples.append(time.perf_counter() - start)
    links = sum(len(v) for v in inventory.links.links.values())
    return Result(f"Cambricon discover(): {len(inventory.cards)} MLUs, {links} links", samples)


def bench_hot_removal(root: Path, rescan_seconds: float, rounds: int) -> Result:
    node = write_cambricon_node(root / f"removal-{rescan_seconds}", mlulink_node(8))
    stop = threading.Event()
    options = {"udev": "off", "rescanSeconds": str(rescan_seconds), "mluLinkFile": str(node.link_file)}
    backend = create_backend(BackendConfig(host_root=node.host_root, options=options, stop=stop))
    cards = backend.discover().cards
    victim = cards[2]
    pools = "version: v1\npools:\n  - name: mlu\n    devices:\n" + "".join(
        f"      - uuid: {c.id}\n" for c in cards
    )
    write_configmap_volume(root / "pools", {"pools.yaml": pools})
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    daemon = Daemon(DaemonConfig(plugin_dir=root / "dp", node_name="bench"), {backend.name: backend})
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    resource = "gpu.deckhouse.io/mlu"
    seen = threading.Condition()
    arrivals: list[tuple[float, bool]] = []

    def listener(name: str, devices: list[Any], at: float) -> None:
        with seen:
            arrivals.append((at, any(victim.id == d.ID and d.health != "Healthy" for d in devices)))
            seen.notify_all()

    kubelet.add_snapshot_listener(listener)
    daemon.start()
    samples = []
    phase = random.Random(7)
    try:
        kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(cards), WAIT, "up")
        for _ in range(rounds):
            with seen:
                arrivals.clear()
            time.sleep(phase.uniform(0, rescan_seconds))  # remove at a random point of the re-scan cycle
            start = time.monotonic()
            node.remove(victim.pci_address)

            def down(s: float = start) -> bool:
                return any(t >= s and bad for t, bad in arrivals)

            with seen:
                if not seen.wait_for(down, WAIT):
                    raise TimeoutError("hot-removal never reached the kubelet simulator")
                samples.append(next(t for t, bad in arrivals if t >= start and bad) - start)
            node.restore(victim.pci_address)
            kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(cards), WAIT, "returned")
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root / "dp", ignore_errors=True)
        shutil.rmtree(root / "pools", ignore_errors=True)
    label = f"Cambricon hot-removal -> Unhealthy at kubelet (re-scan {rescan_seconds * 1000:g} ms)"
    return Result(label, samples)


def run(rounds: int = 50) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="hcscb", dir="/tmp"))
    try:
        results = [
            bench_discovery(root, "mlulink8", mlulink_node(8), rounds),
            bench_discovery(root, "pcie64", pcie_node(64), max(20, rounds // 2)),
            bench_hot_removal(root, 0.05, max(20, rounds // 2)),
            bench_hot_removal(root, 0.01, max(20, rounds // 2)),
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [r.line() for r in results]


if __name__ == "__main__":
    print("\n".join(run()))
