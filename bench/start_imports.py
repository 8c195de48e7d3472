"""What ``hcs-deviceplugin run`` spends importing, by module: ``python -m bench.start_imports``.

The same start as :mod:`bench.start_bench` (the console script of the wheel installed as the image
installs it, so the module list is a node's; the real NVIDIA backend on the fake 8-GPU node, 8
pools, the kubelet simulator here), with ``PYTHONPROFILEIMPORTTIME=1`` in the daemon's
environment: every import the process makes before SIGTERM, in whatever thread, is timed by the
interpreter itself. Each module's self time is the median over the rounds; the groups add up the
self times of the packages that matter for start-up work (ours, each heavy dependency, the rest of
the standard library), so one run says what is left to cut and where. The interpreter's own start
(``python -c pass``) is not in these figures, and the profiler adds its own overhead to each import:
compare figures with each other, and use ``python -m bench --only start`` for the start time itself.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import precompile
from bench.installed import image_or_development_layout
from bench.start_bench import one_round, prepare

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hcs_deviceplugin (ours)", ("hcs_deviceplugin",)),
    ("vendors (ours)", ("vendors",)),
    ("google.protobuf", ("google",)),
    ("h2, hpack, hyperframe", ("h2", "hpack", "hyperframe")),
    ("yaml", ("yaml", "_yaml")),
    ("pynvml", ("pynvml",)),
    ("waitress (once the pools are served)", ("waitress",)),
)
"""Named groups by top-level package; every other module counts as "standard library and other".
``run`` loads waitress on the HTTP server's thread once its pools are served (so do the modules
waitress loads when it resolves its address: ``encodings.idna``, ``stringprep``, ``platform``): they
are counted, since the daemon runs on until SIGTERM, but are off the way to registration."""


@dataclass(frozen=True)
class ImportCost:
    """One line of ``-X importtime``: microseconds in the module itself and with what it imported."""

    module: str
    self_us: int
    cumulative_us: int
    depth: int


def parse_importtime(text: str) -> list[ImportCost]:
    """The ``import time:`` lines of a stderr capture, in order; other lines and the header skipped."""
    found: list[ImportCost] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            found.append(ImportCost(match[4], int(match[1]), int(match[2]), len(match[3]) // 2))
    return found


def group_of(module: str) -> str:
    top = module.split(".", 1)[0]
    for name, packages in GROUPS:
        if top in packages:
            return name
    return "standard library and other"


def median_self_times(runs: Sequence[Sequence[ImportCost]]) -> dict[str, float]:
    """Each module's median self time (µs) over ``runs``; a module missing from a run counts 0 there."""
    modules = {cost.module for run in runs for cost in run}
    per_run = [{cost.module: cost.self_us for cost in run} for run in runs]
    return {m: statistics.median(run.get(m, 0) for run in per_run) for m in modules}


def by_group(self_times: dict[str, float]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for module, us in self_times.items():
        group = group_of(module)
        totals[group] = totals.get(group, 0.0) + us
    return totals


def report(self_times: dict[str, float], top: int) -> Iterable[str]:
    total = sum(self_times.values())
    yield f"imports during start (median self time, {len(self_times)} modules): {total / 1000:.1f} ms"
    for group, us in sorted(by_group(self_times).items(), key=lambda kv: -kv[1]):
        yield f"  {group:<32} {us / 1000:7.1f} ms"
    yield f"top {top} modules by self time:"
    for module, us in sorted(self_times.items(), key=lambda kv: -kv[1])[:top]:
        yield f"  {module:<56} {us / 1000:7.2f} ms"


def run(rounds: int = 5, pools: int = 8, top: int = 40) -> list[str]:
    precompile()  # for the editable layout, should the image's not build here
    root = Path(tempfile.mkdtemp(prefix="hcsi", dir="/tmp"))
    try:
        fake, names = prepare(root, pools)
        with image_or_development_layout() as (layout, note):
            one_round(layout, root, fake, names)  # warm the page cache and the .pyc files
            runs: list[list[ImportCost]] = []
            for k in range(rounds):
                capture = root / f"imports-{k}.txt"
                with capture.open("wb") as stderr:
                    one_round(layout, root, fake, names, {"PYTHONPROFILEIMPORTTIME": "1"}, stderr)
                runs.append(parse_importtime(capture.read_text(errors="replace")))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [f"layout: {note}", *report(median_self_times(runs), top)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    print("\n".join(run(args.rounds, top=args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
