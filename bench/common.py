"""What every benchmark prints: median, p99 and, where a floor exists, the ratio to it.

Benchmarks also record their headline figures with :func:`headline`; ``python -m bench --markdown``
prints those as the README's Performance table (figure, ours, floor or target).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Result:
    name: str
    samples: list[float]
    floor: float | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        return percentile(self.samples, 99)

    def line(self) -> str:
        ratio = f"{self.median / self.floor:8.2f}x" if self.floor else " " * 9
        count = f"n={len(self.samples):>5}"
        return f"{self.name:<52} {count}  median {fmt(self.median)}  p99 {fmt(self.p99)}  {ratio}"

    def overhead_line(self) -> str:
        """The median above the floor's median: what this call costs beyond any gRPC call."""
        if self.floor is None:
            raise ValueError(f"{self.name}: no floor to compare with")
        above = f"{self.name}: above the floor"
        return f"{above:<52} n={len(self.samples):>5}  median {fmt(self.median - self.floor)}"


@dataclass(frozen=True)
class Figure:
    """One row of the README's Performance table."""

    name: str
    ours: str
    reference: str = ""
    """The floor measured in the same run, a ratio to it, or the target the figure is held to."""


HEADLINES: list[Figure] = []
"""Rows recorded by the benchmarks of this run, in the order they ran."""


def headline(name: str, ours: str, reference: str = "") -> None:
    HEADLINES.append(Figure(name, ours, reference))


def markdown_table(figures: Sequence[Figure]) -> str:
    rows = ["| figure | ours | floor / ratio / target |", "|---|---|---|"]
    rows += [f"| {f.name} | {f.ours} | {f.reference} |" for f in figures]
    return "\n".join(rows)


def percentile(samples: Sequence[float], pct: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def fmt(seconds: float) -> str:
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    return f"{seconds * 1e3:8.2f} ms"


def short(seconds: float) -> str:
    """``fmt`` without the padding, for tables."""
    return fmt(seconds).strip().replace("us", "µs")


def interleaved(calls: Sequence[Callable[[], object]], count: int) -> list[list[float]]:
    """``count`` timings of each call, taken in turn (a, b, c, b, c, a, c, a, b, ...) after a warm-up.

    On a machine whose load changes from second to second, timing one call's samples after another's
    compares different moments; taking them in turn lets a ratio or a difference to the floor mean
    what it says. Each round starts one call further on, so that no call is always the one that
    follows the loop's own bookkeeping (the floor, listed first, was measurably dearer for it).
    """
    for _ in range(min(100, count)):
        for call in calls:
            call()
    samples: list[list[float]] = [[] for _ in calls]
    order = list(range(len(calls)))
    for round_number in range(count):
        shift = round_number % len(calls)
        for index in order[shift:] + order[:shift]:
            call = calls[index]
            start = time.perf_counter()
            call()
            samples[index].append(time.perf_counter() - start)
    return samples


def compiled_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a daemon process that reads compiled modules, as the image's does.

    The image installs wheels, and pip writes their ``.pyc`` files then; an editable checkout with
    ``PYTHONDONTWRITEBYTECODE`` set (the image's own variable, often exported on a dev machine too)
    would compile every module of ours on every start, some 100 ms of CPU that no node pays. So the
    bench lets the child read and write bytecode where Python keeps it (``__pycache__``, ignored by
    git; the installed packages' files are already there), and :func:`precompile` writes ours
    before the first start.
    """
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def precompile() -> None:
    """Write the bytecode of our packages, as pip does at install time."""
    root = Path(__file__).resolve().parents[1]
    packages = [str(root / "hcs_deviceplugin"), str(root / "vendors")]
    env = compiled_env(dict(os.environ))
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *packages], env=env, check=True, stdout=subprocess.DEVNULL
    )
