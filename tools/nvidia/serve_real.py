"""Serve a real NVIDIA node's GPUs through the whole daemon to the kubelet simulator, read-only.

Run from the repository root on a GPU machine (no kubelet needed; everything lives in a temp dir):

    PYTHONPATH=. python3 tools/nvidia/serve_real.py [--slices 4] [--health-seconds 5]

It discovers the GPUs with the real backend, writes a native pools file with one time-sliced pool of
every GPU, starts the daemon and the kubelet simulator on real unix sockets, allocates through
GetPreferredAllocation + Allocate, and prints one JSON document: timings, what kubelet saw, and the
Allocate answers under the default and the device-specs strategies. It never changes MIG mode,
never creates or destroys instances and never resets a GPU (no Partition pool is used).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml
from google.protobuf.json_format import MessageToDict

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.nvidia import create_backend


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--health-seconds", type=float, default=5.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hcsr", dir="/tmp"))
    stop = threading.Event()
    report: dict[str, object] = {}
    started = time.monotonic()
    backend = create_backend(BackendConfig(stop=stop))
    inventory = backend.discover()
    report["discover_seconds"] = round(time.monotonic() - started, 4)
    cards = [c.id for c in inventory.cards]
    report["cards"] = cards
    pools = {
        "version": "v1",
        "pools": [
            {"name": "real-shared", "slicesPerUnit": args.slices, "devices": [{"uuid": c} for c in cards]},
        ],
    }
    write_configmap_volume(root / "pools", {"pools.yaml": yaml.safe_dump(pools)})
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    daemon = Daemon(DaemonConfig(plugin_dir=root / "dp", node_name="real"), {backend.name: backend})
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    try:
        t0 = time.monotonic()
        daemon.start()
        resource = "gpu.deckhouse.io/real-shared"
        kubelet.wait_for(lambda k: resource in k.resources() and k.resource(resource).connected, 20, "up")
        report["start_to_registered_seconds"] = round(time.monotonic() - t0, 4)
        view = kubelet.resource(resource)
        report["kubelet_healthy"] = sorted(view.healthy)
        report["kubelet_unhealthy"] = sorted(view.unhealthy)
        report["kubelet_numa"] = {k: list(v) for k, v in view.numa.items()}
        record = kubelet.allocate("pod-a", "main", resource, min(2, len(view.healthy)))
        report["allocated"] = list(record.device_ids)
        report["allocate_response"] = MessageToDict(record.response)
        time.sleep(args.health_seconds)  # observation window for real NVML events, not a test wait
        report["after_health_window"] = {
            "healthy": len(kubelet.resource(resource).healthy),
            "unhealthy": sorted(kubelet.resource(resource).unhealthy),
            "cards": [(c.id, c.health.value) for c in daemon.view().cards],
        }
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
