"""What ``hcs-deviceplugin run`` spends importing, by module, before and after its pools stream:
``python -m bench.start_imports``.

The same start as :mod:`bench.start_bench` (the console script of the wheel installed as the image
installs it, so the module list is a node's; the real NVIDIA backend on the fake 8-GPU node, 8
pools, the kubelet simulator here), with ``PYTHONPROFILEIMPORTTIME=1`` in the daemon's
environment: each import's self time is measured by the interpreter itself (``-X importtime``).

Those lines carry neither a time nor a thread, and the daemon keeps importing after its pools
stream (waitress and the probes on the HTTP thread, the allocator on the settle thread), so the
run is split in two by what the daemon's stderr says, in the order it was written:

* the console script runs under a small ``python -c`` wrapper (:data:`WRAPPER`) that adds an audit
  hook (``sys.addaudithook``, event ``import``) and then executes the script's own code unchanged;
  the hook writes ``hcs-import-start MODULE THREAD`` to fd 2 as each import begins, the interpreter
  writes its ``import time:`` line to the same fd as the import ends, so each line is matched to
  its thread, and an import that ran while another thread was importing is flagged (``-X
  importtime`` keeps one nesting counter per process, so such self times are skewed);
* this process writes :data:`STREAMING_MARK` into the same file (opened for appending, shared with
  the daemon's stderr) the moment the kubelet simulator sees every pool registered and streaming
  with devices. An import whose line comes before the mark ended before kubelet had every pool;
  the rest ran after it, until SIGTERM. The daemon starts its after-start work (the settle
  thread's allocator) once it has handed every first list over, a moment before the simulator has
  read them all, so a few of those imports can fall before the mark: their thread says so.

Each module's self time is the median over the rounds (0 in a round where it fell in the other
part); groups add up the packages that matter (ours, each heavy dependency, the rest). What is not
in these figures: the interpreter's own start (``python -c pass``), the wrapper's few imports before
its hook, and the body of a module loaded by ``importlib.import_module`` (the backends' entry
points), which the interpreter does not time (what that module imports is timed). The profiler and
the hook add their own overhead to each import: compare figures with each other, and use ``python
-m bench --only start`` for the start time itself.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import compiled_env, precompile
from bench.footprint_bench import free_port
from bench.installed import Layout, image_or_development_layout
from bench.start_bench import prepare, run_command, timed_start
from vendors.nvidia.fake.prepare import FakeNvidiaNode

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")
START = "hcs-import-start"
STREAMING_MARK = "hcs-bench: every pool streaming"
BEFORE_HOOK = "(before the hook)"
"""The thread of an ``import time:`` line with no start line: imported before the wrapper's hook."""

WRAPPER = f"""
import os, sys

def _seen(event, args):
    if event == "import":
        try:
            thread = sys.modules["threading"].current_thread().name
        except (KeyError, AttributeError):  # threading not (yet fully) loaded: only the main thread runs
            thread = "MainThread"
        os.write(2, f"{START} {{args[0]}} {{thread}}\\n".encode())

sys.addaudithook(_seen)
kind, target = sys.argv[1:3]
if kind == "-m":
    import runpy
    sys.argv[:3] = [target]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.argv[:3] = [target]
    sys.path[0] = os.path.dirname(os.path.abspath(target))  # as for a script: not the current directory
    with open(target, "rb") as script:
        code = compile(script.read(), target, "exec")
    exec(code, {{"__name__": "__main__", "__file__": target, "__builtins__": __builtins__}})
"""
"""``python -c WRAPPER SCRIPT ARGS...`` (or ``-m MODULE ARGS...``): the start lines, then the
command as its console script (or ``python -m``) runs it."""

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hcs_deviceplugin (ours)", ("hcs_deviceplugin",)),
    ("vendors (ours)", ("vendors",)),
    ("google.protobuf", ("google",)),
    ("h2, hpack, hyperframe", ("h2", "hpack", "hyperframe")),
    ("yaml", ("yaml", "_yaml")),
    ("pynvml", ("pynvml",)),
    ("waitress", ("waitress",)),
)
"""Named groups by top-level package; every other module counts as "standard library and other"."""
OURS = ("hcs_deviceplugin", "vendors")


@dataclass(frozen=True)
class ImportCost:
    """One line of ``-X importtime``: microseconds in the module itself and with what it imported;
    the thread that imported it, whether it ended after every pool streamed, and whether another
    thread imported meanwhile (its self time then counts some of the other's)."""

    module: str
    self_us: int
    cumulative_us: int
    depth: int
    thread: str = BEFORE_HOOK
    after_streaming: bool = False
    overlapped: bool = False


@dataclass
class _Open:
    """An import begun (its start line seen) and not yet ended."""

    module: str
    overlapped: bool


def parse_importtime(text: str) -> list[ImportCost]:
    """The ``import time:`` lines of a stderr capture, in order, each with its thread and part of
    the run (before or after :data:`STREAMING_MARK`); other lines and the header skipped."""
    found: list[ImportCost] = []
    open_by_thread: dict[str, list[_Open]] = {}
    after = False
    for line in text.splitlines():
        if line.startswith(START + " "):
            _, module, thread = line.split(" ", 2)
            stack = open_by_thread.setdefault(thread, [])
            if stack and stack[-1].module == module:
                continue  # the hook sees a built-in or extension module's import twice
            others = [frame for t, frames in open_by_thread.items() if t != thread for frame in frames]
            for frame in others:
                frame.overlapped = True
            stack.append(_Open(module, bool(others)))
            continue
        if line.strip() == STREAMING_MARK:
            after = True
            continue
        match = _LINE.match(line)
        if match:
            module = match[4]
            thread, ended = _close(open_by_thread, module)
            overlapped = ended.overlapped if ended else False
            depth = len(match[3]) // 2
            found.append(ImportCost(module, int(match[1]), int(match[2]), depth, thread, after, overlapped))
    return found


def _close(open_by_thread: dict[str, list[_Open]], module: str) -> tuple[str, _Open | None]:
    """The thread whose innermost open import is ``module`` (else any that has it open), with that
    import taken off its stack; :data:`BEFORE_HOOK` if none began it under the hook."""
    for thread, stack in open_by_thread.items():
        if stack and stack[-1].module == module:
            return thread, stack.pop()
    for thread, stack in open_by_thread.items():
        for index in range(len(stack) - 1, -1, -1):
            if stack[index].module == module:
                frame = stack[index]
                del stack[index:]
                return thread, frame
    return BEFORE_HOOK, None


def group_of(module: str) -> str:
    top = module.split(".", 1)[0]
    for name, packages in GROUPS:
        if top in packages:
            return name
    return "standard library and other"


def is_ours(module: str) -> bool:
    return module.split(".", 1)[0] in OURS


def median_self_times(runs: Sequence[Sequence[ImportCost]]) -> dict[str, float]:
    """Each module's median self time (µs) over ``runs``; a module missing from a run counts 0 there,
    and a module imported twice in a run (a thread waiting on another's import) counts both."""
    per_run: list[dict[str, int]] = []
    for run in runs:
        totals: dict[str, int] = {}
        for cost in run:
            totals[cost.module] = totals.get(cost.module, 0) + cost.self_us
        per_run.append(totals)
    modules = {m for run in per_run for m in run}
    return {m: statistics.median(run.get(m, 0) for run in per_run) for m in modules}


def by_group(self_times: dict[str, float]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for module, us in self_times.items():
        group = group_of(module)
        totals[group] = totals.get(group, 0.0) + us
    return totals


@dataclass(frozen=True)
class Part:
    """One part of the runs (before every pool streams, or after): per-module medians, and each
    module's thread and overlap as last seen."""

    title: str
    self_times: dict[str, float]
    threads: dict[str, str]
    overlapped: frozenset[str]

    @classmethod
    def of(cls, title: str, runs: Sequence[Sequence[ImportCost]], after_streaming: bool) -> Part:
        picked = [[c for c in run if c.after_streaming == after_streaming] for run in runs]
        threads = {c.module: c.thread for run in picked for c in run}
        overlapped = frozenset(c.module for run in picked for c in run if c.overlapped)
        return cls(title, median_self_times(picked), threads, overlapped)


def report(part: Part, top: int) -> Iterable[str]:
    """A part's total, its groups, its threads, every module of ours and the top others."""
    times = {m: us for m, us in part.self_times.items() if us > 0}
    yield f"{part.title} (median self time, {len(times)} modules): {sum(times.values()) / 1000:.1f} ms"
    for group, us in sorted(by_group(times).items(), key=lambda kv: -kv[1]):
        yield f"  {group:<32} {us / 1000:7.1f} ms"
    per_thread: dict[str, float] = {}
    for module, us in times.items():
        per_thread[part.threads[module]] = per_thread.get(part.threads[module], 0.0) + us
    yield "  by thread: " + ", ".join(
        f"{thread} {us / 1000:.1f} ms" for thread, us in sorted(per_thread.items(), key=lambda kv: -kv[1])
    )
    if part.overlapped:
        yield f"  {len(part.overlapped)} modules imported while another thread imported (marked *)"

    def row(module: str, us: float) -> str:
        mark = "*" if module in part.overlapped else " "
        return f"  {module:<56} {us / 1000:7.2f} ms {mark} {part.threads[module]}"

    ours = sorted(((m, us) for m, us in times.items() if is_ours(m)), key=lambda kv: -kv[1])
    yield f"ours, every module ({len(ours)}, {sum(us for _, us in ours) / 1000:.1f} ms):"
    yield from (row(m, us) for m, us in ours)
    others = sorted(((m, us) for m, us in times.items() if not is_ours(m)), key=lambda kv: -kv[1])
    yield f"top {top} others:"
    yield from (row(m, us) for m, us in others[:top])


def wrapped(layout: Layout, command: Sequence[str]) -> list[str]:
    """``command`` (``layout.script`` and its arguments) run under :data:`WRAPPER`."""
    script = layout.script
    arguments = list(command[len(script) :])
    if len(script) == 1:
        return [layout.python, "-c", WRAPPER, "script", script[0], *arguments]
    if len(script) == 3 and script[1] == "-m":
        return [script[0], "-c", WRAPPER, "-m", script[2], *arguments]
    raise ValueError(f"cannot wrap the command {script!r}")


def profiled_round(layout: Layout, root: Path, fake: FakeNvidiaNode, names: set[str], capture: Path) -> None:
    """One start of ``layout`` under the wrapper with ``-X importtime``, its stderr in ``capture``
    and :data:`STREAMING_MARK` written there when the simulator sees every pool streaming."""
    command = wrapped(layout, run_command(layout, root, fake, free_port()))
    env = layout.env(compiled_env({**os.environ, **fake.env, "PYTHONPROFILEIMPORTTIME": "1"}))
    with capture.open("ab") as stderr:  # appending: the daemon's writes and the mark keep their order
        timed_start(
            root,
            command,
            env,
            names,
            stderr,
            lambda: os.write(stderr.fileno(), f"{STREAMING_MARK}\n".encode()),
        )


def run(rounds: int = 5, pools: int = 8, top: int = 25) -> list[str]:
    precompile()  # for the editable layout, should the image's not build here
    root = Path(tempfile.mkdtemp(prefix="hcsi", dir="/tmp"))
    try:
        fake, names = prepare(root, pools)
        with image_or_development_layout() as (layout, note):
            profiled_round(layout, root, fake, names, root / "warm.txt")  # the page cache, the .pyc files
            runs: list[list[ImportCost]] = []
            for k in range(rounds):
                capture = root / f"imports-{k}.txt"
                profiled_round(layout, root, fake, names, capture)
                text = capture.read_text(errors="replace")
                if STREAMING_MARK not in text:
                    raise RuntimeError(f"round {k}: no streaming mark in the daemon's stderr")
                runs.append(parse_importtime(text))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    before = Part.of("imports before every pool streams", runs, after_streaming=False)
    after = Part.of("imports after, until SIGTERM", runs, after_streaming=True)
    return [f"layout: {note}", *report(before, top), *report(after, top)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print("\n".join(run(args.rounds, top=args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
