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

import shutil
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Result
from bench.hotplug import hot_removal_samples
from hcs_deviceplugin.backend import BackendConfig
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
    victim = backend.discover().cards[2]
    samples = hot_removal_samples(
        root,
        backend,
        stop,
        victim,
        lambda card: node.remove(card.pci_address),
        lambda card: node.restore(card.pci_address),
        rescan_seconds,
        rounds,
    )
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
