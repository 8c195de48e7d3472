"""What every benchmark prints: median, p99 and, where a floor exists, the ratio to it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    name: str
    samples: list[float]
    floor: float | None = None

    def line(self) -> str:
        median = statistics.median(self.samples)
        p99 = percentile(self.samples, 99)
        ratio = f"{median / self.floor:8.2f}x" if self.floor else " " * 9
        return f"{self.name:<52} n={len(self.samples):>5}  median {fmt(median)}  p99 {fmt(p99)}  {ratio}"


def percentile(samples: Sequence[float], pct: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    return f"{seconds * 1e3:8.2f} ms"
