"""Hygon backend timings on generated sysfs trees (no vendor library: the tree is the hardware).

Discovery of an 8-DCU xGMI node and a 64-DCU PCIe node (every file the backend reads is a real file
under a temp host root, so this is the sysfs-reading cost on this machine's page cache), one health
check pass over 64 DCUs (what each re-scan costs), and a hot-removal (the card's PCI function, DRM
devices and KFD node deleted from the tree) → Unhealthy at the kubelet simulator through the whole
daemon. With udev off the removal is noticed at the next re-scan, so that latency is bounded by the
re-scan interval named in its label (median about half of it, plus one check pass); each removal
starts at a random point of the interval. With udev a real host is woken by the ``remove`` event.
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
from vendors.hygon import create_backend
from vendors.hygon.fake import HygonNodeSpec, pcie_node, write_hygon_node, xgmi_node

WAIT = 10.0
RESCAN_SECONDS = 0.05


def _config(root: Path, stop: threading.Event, rescan: float = RESCAN_SECONDS) -> BackendConfig:
    return BackendConfig(host_root=root, options={"udev": "off", "rescanSeconds": str(rescan)}, stop=stop)


def bench_discovery(root: Path, name: str, spec: HygonNodeSpec, rounds: int) -> Result:
    fake = write_hygon_node(root / name, spec)
    backend = create_backend(_config(fake.host_root, threading.Event()))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        inventory = backend.discover()
        samples.append(time.perf_counter() - start)
    return Result(f"Hygon discover(): {len(inventory.cards)} DCUs ({name})", samples)


def bench_health_check(root: Path, rounds: int) -> Result:
    fake = write_hygon_node(root / "check64", pcie_node(64))
    backend = create_backend(_config(fake.host_root, threading.Event()))
    backend.discover()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        verdicts = backend.health_now()
        samples.append(time.perf_counter() - start)
    assert len(verdicts) == 64
    return Result("Hygon health check pass: 64 DCUs (one re-scan)", samples)


def bench_hot_removal(root: Path, rounds: int) -> Result:
    fake = write_hygon_node(root / "hotplug", xgmi_node(8))
    stop = threading.Event()
    backend = create_backend(_config(fake.host_root, stop))
    victim = backend.discover().cards[3]
    samples = hot_removal_samples(
        root,
        backend,
        stop,
        victim,
        lambda card: fake.remove_card(card.pci_address),
        lambda card: fake.restore_card(card.pci_address),
        RESCAN_SECONDS,
        rounds,
        seed=9,
    )
    label = f"Hygon hot-removal -> Unhealthy at kubelet (re-scan {RESCAN_SECONDS * 1000:g} ms, udev off)"
    return Result(label, samples)


def run(rounds: int = 50) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="hcshb", dir="/tmp"))
    try:
        results = [
            bench_discovery(root, "xgmi-8", xgmi_node(8), rounds),
            bench_discovery(root, "pcie-64", pcie_node(64), rounds),
            bench_health_check(root, rounds),
            bench_hot_removal(root, max(20, rounds // 2)),
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [r.line() for r in results]


if __name__ == "__main__":
    print("\n".join(run()))
