"""``hcs-deviceplugin run`` as an operator starts and stops it: exec → serving, SIGTERM → exit.

The real command (the console script, in a fresh interpreter) runs the real NVIDIA backend on the
fake libnvidia-ml of an 8-GPU DGX H100 node; the kubelet simulator, with pod-resources, runs in this
process. **Start** is the time from exec to every pool registered with the simulator and its
ListAndWatch streaming with devices; **stop** is SIGTERM to the process gone. Beside them the floors
the same machine sets: the interpreter with nothing (``python -c pass``) and ``import grpc``, and the
CPU time the daemon had used when it was serving (user + system, from ``/proc``), which a busy
machine does not inflate the way it inflates wall-clock time.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import yaml

from bench.common import Result, compiled_env, headline, precompile, short
from bench.footprint_bench import free_port
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.nvidia.fake.node import dgx_h100_node
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

WAIT = 30.0


def console_script() -> list[str]:
    """``hcs-deviceplugin`` next to this interpreter if installed there, else the module."""
    script = Path(sys.executable).parent / "hcs-deviceplugin"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hcs_deviceplugin.cli"]


def pools_document(cards: list[str], pools: int) -> str:
    per_pool = len(cards) // pools
    docs = [
        {"name": f"nv-{p}", "devices": [{"uuid": c} for c in cards[p * per_pool : (p + 1) * per_pool]]}
        for p in range(pools)
    ]
    return yaml.safe_dump({"version": "v1", "pools": docs}, sort_keys=False)


def run_command(root: Path, fake: FakeNvidiaNode, port: int) -> list[str]:
    command = [*console_script(), "run", "--plugin-dir", str(root / "dp"), "--pools-dir", str(root / "pools")]
    command += ["--vendors", "nvidia", "--node-name", "bench-nv", "--host-root", str(fake.host_root)]
    command += ["--backend-option", f"nvidia.library={fake.library}", "--state-dir", str(root / "state")]
    command += ["--pod-resources-socket", str(root / "pr.sock"), "--metrics-address", "127.0.0.1"]
    return [*command, "--metrics-port", str(port), "--log-level", "error"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(
    root: Path,
    fake: FakeNvidiaNode,
    names: set[str],
    extra_env: Mapping[str, str] | None = None,
    stderr: IO[bytes] | None = None,
) -> tuple[float, float, float]:
    """Start one daemon on the fake node; (exec → all pools streaming, its CPU time, SIGTERM → exit).

    ``extra_env`` and ``stderr`` are for profiling runs (:mod:`bench.start_imports`)."""
    env = compiled_env({**os.environ, **fake.env, **(extra_env or {})})
    return timed_start(root, run_command(root, fake, free_port()), env, names, stderr)


def timed_start(
    root: Path, command: list[str], env: Mapping[str, str], names: set[str], stderr: IO[bytes] | None = None
) -> tuple[float, float, float]:
    """Run ``command`` (a daemon whose plugin dir is ``root/dp``) on a fresh kubelet simulator;
    (exec → every pool in ``names`` registered and streaming with devices, its CPU time by then,
    SIGTERM → exit)."""
    shutil.rmtree(root / "dp", ignore_errors=True)
    shutil.rmtree(root / "state", ignore_errors=True)
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    try:
        began = time.monotonic()
        proc = subprocess.Popen(command, env=env, stderr=stderr)
        try:
            kubelet.wait_for(
                lambda k: all(
                    n in k.resources() and k.resource(n).connected and k.resource(n).healthy for n in names
                ),
                WAIT,
                "every pool registered and streaming with devices",
            )
            started = time.monotonic() - began
            cpu = cpu_seconds(proc.pid)
        finally:
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
            stopped = time.monotonic() - signalled
    finally:
        kubelet.stop()
    return started, cpu, stopped


def interpreter_floor(rounds: int, code: str) -> Result:
    samples = []
    for _ in range(rounds):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.monotonic() - began)
    return Result(f"floor: python -c {code!r}", samples)


def prepare(root: Path, pools: int) -> tuple[FakeNvidiaNode, set[str]]:
    """The fake 8-GPU node and the pools volume under ``root``; the resource names to wait for."""
    fake = prepare_fake_node(root / "node", dgx_h100_node(), build_dir=root / "build")
    node = yaml.safe_load(fake.node_file.read_text())
    cards = [str(g["uuid"]) for g in node["gpus"]]
    write_configmap_volume(root / "pools", {"pools.yaml": pools_document(cards, pools)})
    return fake, {f"gpu.deckhouse.io/nv-{p}" for p in range(pools)}


def run(rounds: int = 20, pools: int = 8) -> list[str]:
    precompile()
    root = Path(tempfile.mkdtemp(prefix="hcss", dir="/tmp"))
    try:
        fake, names = prepare(root, pools)
        one_round(root, fake, names)  # warm the page cache and the .pyc files
        starts: list[float] = []
        cpus: list[float] = []
        stops: list[float] = []
        for _ in range(rounds):
            started, used, stopped = one_round(root, fake, names)
            starts.append(started)
            cpus.append(used)
            stops.append(stopped)
        bare = interpreter_floor(rounds, "pass")
        grpc_floor = interpreter_floor(rounds, "import grpc")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    start = Result(f"exec -> {pools} pools streaming (NVIDIA, fake NVML, 8 GPUs)", starts)
    cpu = Result("  its CPU time (user + sys) by then", cpus)
    stop = Result("SIGTERM -> process exit", stops)
    headline(
        f"start: exec → {pools} pools registered + streaming, 8 GPUs (median, p99)",
        f"{short(start.median)}, {short(start.p99)}",
        f"`import grpc` {short(grpc_floor.median)}, `python -c pass` {short(bare.median)}; target ≤ 60 ms",
    )
    headline("start: the daemon's CPU time by then (median)", short(cpu.median), "user + sys, from /proc")
    headline(
        "SIGTERM → exit (median, p99)", f"{short(stop.median)}, {short(stop.p99)}", "target p99 ≤ 200 ms"
    )
    return [r.line() for r in (start, cpu, stop, bare, grpc_floor)]


if __name__ == "__main__":
    print("\n".join(run()))
