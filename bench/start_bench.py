"""``hcs-deviceplugin run`` as an operator starts and stops it: exec → serving, SIGTERM → exit.

The real command (the console script, in a fresh interpreter) runs the real NVIDIA backend on the
fake libnvidia-ml of an 8-GPU DGX H100 node; the kubelet simulator, with pod-resources, runs in this
process. **Start** is the time from exec to every pool registered with the simulator and its
ListAndWatch streaming with devices; **stop** is SIGTERM to the process gone.

The headline start is the image's layout (:mod:`bench.installed`: the project's wheel installed in
a throwaway venv, its console script and ``.pyc`` files written by pip), as a node runs it. The
development venv's editable install is timed beside it and labelled so: its finder's ``.pth`` runs
at every interpreter start, before our first line, and no node pays for it.

Floors, in the same run and the same layout, taken in turn with the starts so that a machine whose
load wanders compares like with like: the interpreter with nothing (``python -c pass``); the
libraries the project mandates (``import pynvml, yaml``: NVML through nvidia-ml-py, and ConfigMaps
are YAML); and :data:`START_MUST_IMPORT`, what any start of a plugin of this shape must import. Each line
says start's ratio to the floor and the milliseconds above it (ours). ``import grpc`` is no longer a
floor: the daemon does not import grpcio (its gRPC is ``hcs_deviceplugin/rpc/``), so that figure
says nothing about what a start must cost. Beside the wall-clock figures, the CPU time the daemon
had used when it was serving (user + system, from ``/proc``), which a busy machine does not inflate
the way it inflates wall-clock time.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, TypeVar

import yaml

from bench.common import Result, compiled_env, fmt, headline, precompile, short
from bench.footprint_bench import free_port
from bench.installed import Layout, development_layout, image_or_development_layout
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.nvidia.fake.node import dgx_h100_node
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

WAIT = 30.0
MANDATED = ("pynvml", "yaml")
"""nvidia-ml-py (imported as pynvml: ctypes and ctypes.util, which bring shutil, subprocess and
tempfile) and PyYAML (its whole pure-Python loader, and its reader's large regular expression)."""
START_MUST_IMPORT = (
    *MANDATED,
    "socket",  # the plugin and kubelet unix sockets
    "select",  # our HTTP/2 server waits on its sockets with it
    "threading",  # a server thread per pool, the control loop, the watchers
    "signal",  # SIGTERM and SIGINT stop the daemon
    "struct",  # HTTP/2 frame headers and the gRPC message prefix
    "argparse",  # the command line
    "logging",  # every module logs through it
    "dataclasses",  # the model's value types
    "typing",  # Protocol interfaces, cast; loaded by nearly every library above anyway
    "hpack",  # decodes the HTTP/2 header blocks kubelet sends (hcs_deviceplugin/rpc/)
)
"""What any start of a Python device plugin serving kubelet over gRPC on unix sockets, with a pool
file in YAML and NVML through nvidia-ml-py, must import; every one is on ``run``'s way to serving
(``tests/image/test_bench_layout.py`` checks that ``run`` loads each)."""

T = TypeVar("T")


def pools_document(cards: list[str], pools: int) -> str:
    per_pool = len(cards) // pools
    docs = [
        {"name": f"nv-{p}", "devices": [{"uuid": c} for c in cards[p * per_pool : (p + 1) * per_pool]]}
        for p in range(pools)
    ]
    return yaml.safe_dump({"version": "v1", "pools": docs}, sort_keys=False)


def run_command(layout: Layout, root: Path, fake: FakeNvidiaNode, port: int) -> list[str]:
    command = [*layout.script, "run", "--plugin-dir", str(root / "dp"), "--pools-dir", str(root / "pools")]
    command += ["--vendors", "nvidia", "--node-name", "bench-nv", "--host-root", str(fake.host_root)]
    command += ["--backend-option", f"nvidia.library={fake.library}", "--state-dir", str(root / "state")]
    command += ["--pod-resources-socket", str(root / "pr.sock"), "--metrics-address", "127.0.0.1"]
    return [*command, "--metrics-port", str(port), "--log-level", "error"]


def process_cpu_clock(pid: int) -> int:
    """Linux's CPU-time clock of process ``pid``, all its threads (exited ones too), in nanoseconds.

    What ``clock_getcpuclockid(3)`` returns, which Python does not wrap: the kernel encodes a
    process's clock as ``(~pid << 3) | CPUCLOCK_SCHED`` (``include/linux/posix-timers.h``)."""
    return (~pid << 3) | 2


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far, to the nanosecond where the kernel lets us
    read its CPU clock; else in clock ticks (10 ms) from ``/proc/<pid>/stat`` fields 14 and 15, too
    coarse to tell a change of a few milliseconds."""
    try:
        return time.clock_gettime(process_cpu_clock(pid))
    except OSError:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for ``proc`` to exit and reap it; its exit status. Woken by the exit itself, not a clock.

    ``Popen.wait(timeout=...)`` polls: it sleeps 1, 2, 4 ... ms, then 50 ms at a time, so an exit
    is seen only at the next of 1, 3, 7, 15, 31, 63, 113 ... ms, and a stop of 35 ms is timed as
    63. A pidfd (Linux 5.3) turns readable when the process exits; where there is none, a thread
    blocks in ``waitpid`` and we wait on its end (a lock, no polling).
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd_open: older kernel, or not Linux
        reaper = threading.Thread(target=proc.wait, daemon=True)
        reaper.start()
        reaper.join(timeout)
        if reaper.is_alive():
            raise subprocess.TimeoutExpired(proc.args, timeout) from None
        return proc.wait()
    try:
        if not select.select([pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(pidfd)
    return proc.wait()  # it has exited: waitpid returns at once


def one_round(
    layout: Layout,
    root: Path,
    fake: FakeNvidiaNode,
    names: set[str],
    extra_env: Mapping[str, str] | None = None,
    stderr: IO[bytes] | None = None,
) -> tuple[float, float, float]:
    """Start one daemon of ``layout`` on the fake node; (exec → all pools streaming, its CPU time,
    SIGTERM → exit). ``extra_env`` and ``stderr`` are for profiling runs (:mod:`bench.start_imports`)."""
    env = layout.env(compiled_env({**os.environ, **fake.env, **(extra_env or {})}))
    return timed_start(root, run_command(layout, root, fake, free_port()), env, names, stderr)


def timed_start(
    root: Path,
    command: list[str],
    env: Mapping[str, str],
    names: set[str],
    stderr: IO[bytes] | None = None,
    on_streaming: Callable[[], object] = lambda: None,
) -> tuple[float, float, float]:
    """Run ``command`` (a daemon whose plugin dir is ``root/dp``) on a fresh kubelet simulator;
    (exec → every pool in ``names`` registered and streaming with devices, its CPU time by then,
    SIGTERM → exit). ``on_streaming`` is called the moment the simulator sees every pool streaming
    (:mod:`bench.start_imports` marks it in the daemon's stderr)."""
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
            on_streaming()
            cpu = cpu_seconds(proc.pid)
        finally:
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            wait_exit(proc, 15)
            stopped = time.monotonic() - signalled
    finally:
        kubelet.stop()
    return started, cpu, stopped


def interpreter_start(layout: Layout, code: str) -> float:
    """Seconds from exec to exit of ``python -c code`` on the layout's interpreter, in its environment."""
    env = layout.env(compiled_env(dict(os.environ)))
    began = time.monotonic()
    subprocess.run([layout.python, "-c", code], cwd=layout.cwd, env=env, check=True)
    return time.monotonic() - began


def interpreter_floor(layout: Layout, rounds: int, code: str) -> Result:
    """``rounds`` starts of ``python -c code`` on the layout's interpreter, one after another."""
    samples = [interpreter_start(layout, code) for _ in range(rounds)]
    return Result(f"floor: python -c {code!r}", samples)


def import_code(modules: Sequence[str]) -> str:
    return f"import {', '.join(modules)}"


def in_turn(tasks: Sequence[Callable[[], T]], rounds: int) -> list[list[T]]:
    """``rounds`` results of each task, taken in turn, each round starting one task further on: the
    rotation of :func:`bench.common.interleaved`, without its hundred warm-up rounds (a start takes
    a fifth of a second; one round warms the page cache)."""
    results: list[list[T]] = [[] for _ in tasks]
    for round_number in range(rounds):
        shift = round_number % len(tasks)
        for index in [*range(shift, len(tasks)), *range(shift)]:
            results[index].append(tasks[index]())
    return results


def prepare(root: Path, pools: int) -> tuple[FakeNvidiaNode, set[str]]:
    """The fake 8-GPU node and the pools volume under ``root``; the resource names to wait for."""
    fake = prepare_fake_node(root / "node", dgx_h100_node(), build_dir=root / "build")
    node = yaml.safe_load(fake.node_file.read_text())
    cards = [str(g["uuid"]) for g in node["gpus"]]
    write_configmap_volume(root / "pools", {"pools.yaml": pools_document(cards, pools)})
    return fake, {f"gpu.deckhouse.io/nv-{p}" for p in range(pools)}


@dataclass(frozen=True)
class Floor:
    """An interpreter start that any start of the daemon includes: ``python -c code`` on a layout."""

    name: str
    layout: Layout
    code: str

    def time(self) -> tuple[float]:
        return (interpreter_start(self.layout, self.code),)


@dataclass(frozen=True)
class Starts:
    """One layout's starts, as lines: exec → serving, the daemon's CPU time by then, SIGTERM → exit."""

    layout: Layout
    start: Result
    cpu: Result
    stop: Result

    @classmethod
    def of(cls, layout: Layout, pools: int, rounds: Sequence[tuple[float, ...]]) -> Starts:
        return cls(
            layout,
            Result(f"start ({layout.label}): exec -> {pools} pools streaming", [r[0] for r in rounds]),
            Result("  its CPU time (user + sys) by then", [r[1] for r in rounds]),
            Result(f"SIGTERM -> process exit ({layout.label})", [r[2] for r in rounds]),
        )


def above(start: Result, floor: Result, name: str) -> str:
    """A start beside the floor ``name`` timed in turn with it: the milliseconds above it, the ratio."""
    name = f"  above {name}"
    ratio = start.median / floor.median
    return (
        f"{name[:52]:<52} n={len(start.samples):>5}  median {fmt(start.median - floor.median)}"
        f"  {'':>15}  {ratio:8.2f}x"
    )


def run(rounds: int = 20, pools: int = 8) -> list[str]:
    precompile()  # the dev layout's modules; pip compiled the image layout's at install
    root = Path(tempfile.mkdtemp(prefix="hcss", dir="/tmp"))
    try:
        fake, names = prepare(root, pools)
        with image_or_development_layout() as (ours, note):
            dev = development_layout()
            beside = [] if ours == dev else [dev]  # where no image layout could be built, only dev's
            more = len(START_MUST_IMPORT) - len(MANDATED)
            floors = [
                Floor("python -c 'pass'", ours, "pass"),
                Floor("import pynvml, yaml", ours, import_code(MANDATED)),
                Floor(f"import pynvml, yaml + {more} more", ours, import_code(START_MUST_IMPORT)),
                *(Floor("python -c 'pass'", layout, "pass") for layout in beside),
            ]
            starts = [partial(one_round, layout, root, fake, names) for layout in (ours, *beside)]
            tasks: list[Callable[[], tuple[float, ...]]] = [*starts, *(floor.time for floor in floors)]
            in_turn(tasks, 1)  # warm the page cache and the .pyc files
            samples = in_turn(tasks, rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    timed = [Starts.of(layout, pools, s) for layout, s in zip((ours, *beside), samples, strict=False)]
    measured = [
        Result(f"floor: {floor.name} ({floor.layout.label})", [r[0] for r in s])
        for floor, s in zip(floors, samples[len(timed) :], strict=True)
    ]
    record_headlines(pools, timed, measured)
    lines = [f"layout: {note}", timed[0].start.line(), timed[0].cpu.line()]
    lines += [
        above(timed[0].start, result, floor.name) for result, floor in zip(measured, floors[:3], strict=False)
    ]
    for other, result, floor in zip(timed[1:], measured[3:], floors[3:], strict=True):
        lines += [other.start.line(), other.cpu.line(), above(other.start, result, floor.name)]
    return [*lines, timed[0].stop.line(), *(result.line() for result in measured)]


def record_headlines(pools: int, timed: Sequence[Starts], floors: Sequence[Result]) -> None:
    """The README's start rows: the first layout's start (the image's where it could be built)
    against each floor, then any other layout's beside its own ``python -c pass``."""
    ours, start, (bare, mandated, must) = timed[0], timed[0].start, floors[:3]
    headline(
        f"start ({ours.layout.label}): exec → {pools} pools registered + streaming, 8 GPUs (median, p99)",
        f"{short(start.median)}, {short(start.p99)}",
        f"`python -c pass` {short(bare.median)} ({start.median / bare.median:.1f}×); target ≤ 60 ms",
    )
    modules = ", ".join(START_MUST_IMPORT)
    for name, floor in (("`import pynvml, yaml`", mandated), (f"`import {modules}`", must)):
        headline(
            f"start above {name} (median)",
            short(start.median - floor.median),
            f"floor {short(floor.median)}; start {start.median / floor.median:.2f}× it",
        )
    headline(
        "start: the daemon's CPU time by then (median)",
        short(ours.cpu.median),
        "user + sys, the process's CPU clock",
    )
    for other, floor in zip(timed[1:], floors[3:], strict=True):
        headline(
            f"start ({other.layout.label}), for comparison (median, p99)",
            f"{short(other.start.median)}, {short(other.start.p99)}",
            f"its `python -c pass` {short(floor.median)}, the {ours.layout.label}'s {short(bare.median)}",
        )
    stop = ours.stop
    headline(
        "SIGTERM → exit (median, p99)", f"{short(stop.median)}, {short(stop.p99)}", "target p99 ≤ 200 ms"
    )


if __name__ == "__main__":
    print("\n".join(run()))
