"""Time ``hcs-deviceplugin run`` on a real NVIDIA node as an operator starts and stops it, read-only.

Run from the repository root on a GPU machine (no kubelet needed; everything lives in a temp dir):

    PYTHONPATH=. python3 tools/nvidia/start_real.py [--rounds 10]

The same measurement as ``bench/start_bench.py`` (exec → every pool registered with the kubelet
simulator and streaming with devices; the daemon's CPU time by then; SIGTERM → exit), but on the
host's own ``libnvidia-ml`` and ``/dev``: one time-sliced pool per GPU. Beside it the interpreter's
floor (``python -c pass``) on the same machine. The daemon is the project's wheel installed in a
throwaway venv, as the image installs it (:mod:`bench.installed`), when this machine can build one
offline (with its own pip and setuptools); otherwise the checkout's command. ``layout`` in the
output says which, and why not the image's. It never changes MIG mode, never creates or destroys
instances and never resets a GPU (no Partition pool is used). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml

from bench.common import Result, compiled_env, precompile
from bench.footprint_bench import free_port
from bench.installed import Layout, image_or_development_layout
from bench.start_bench import interpreter_floor, timed_start
from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.nvidia import create_backend


def real_cards(host_root: Path) -> list[str]:
    """The GPUs' UUIDs as the real backend discovers them (its NVML reference released after)."""
    backend = create_backend(BackendConfig(stop=threading.Event(), host_root=host_root))
    try:
        return [c.id for c in backend.discover().cards]
    finally:
        backend.close()


def one_round(layout: Layout, root: Path, names: set[str], host_root: Path) -> tuple[float, float, float]:
    """Start one daemon on the host's GPUs; (exec → all pools streaming, its CPU time, SIGTERM → exit)."""
    command = [*layout.script, "run", "--plugin-dir", str(root / "dp"), "--pools-dir", str(root / "pools")]
    command += ["--vendors", "nvidia", "--node-name", "real", "--state-dir", str(root / "state")]
    command += ["--pod-resources-socket", str(root / "pr.sock"), "--metrics-address", "127.0.0.1"]
    command += ["--metrics-port", str(free_port()), "--log-level", "error", "--host-root", str(host_root)]
    return timed_start(root, command, layout.env(compiled_env(dict(os.environ))), names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--host-root", type=Path, default=Path("/"), help="for a dry run on a fake node")
    args = parser.parse_args()
    precompile()  # as pip does at install time, for the checkout's command
    cards = real_cards(args.host_root)
    root = Path(tempfile.mkdtemp(prefix="hcst", dir="/tmp"))
    try:
        pools = [
            {"name": f"real-{i}", "slicesPerUnit": 4, "devices": [{"uuid": c}]} for i, c in enumerate(cards)
        ]
        text = yaml.safe_dump({"version": "v1", "pools": pools}, sort_keys=False)
        write_configmap_volume(root / "pools", {"pools.yaml": text})
        names = {f"gpu.deckhouse.io/{p['name']}" for p in pools}
        with image_or_development_layout() as (layout, note):
            one_round(layout, root, names, args.host_root)  # warm the page cache and the .pyc files
            rounds = [one_round(layout, root, names, args.host_root) for _ in range(args.rounds)]
            bare = interpreter_floor(layout, args.rounds, "pass")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results = (
        Result("exec -> pools streaming (real NVML)", [r[0] for r in rounds]),
        Result("  its CPU time (user + sys)", [r[1] for r in rounds]),
        Result("SIGTERM -> exit", [r[2] for r in rounds]),
        bare,
    )
    report = {"cards": cards, "pools": len(pools), "layout": note, "lines": [r.line() for r in results]}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
