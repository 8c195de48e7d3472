"""``python -m bench --only reliability``: issue #15's reliability figures with the full counts.

The same scenarios as tests/reliability (see reliability.py), larger: 100 kubelet restarts, 10,000
admissions while pools.yaml flips every 10 ms, pod-resources down 10 s, 1,000+ hostile files, 50
SIGTERMs each way, and a memory soak (10 minutes by default; ``HCS_SOAK_SECONDS`` shortens it).
"""

from __future__ import annotations

import os

from bench import reliability as scenarios

SOAK_SECONDS = float(os.environ.get("HCS_SOAK_SECONDS", "600"))


def run() -> list[str]:
    lines = [scenarios.kubelet_restarts(restarts=100).summary()]
    lines.append(scenarios.kubelet_restarts(restarts=10, gap=1.5).summary())
    lines.append(scenarios.allocation_churn(allocations=10_000).summary())
    lines.append(scenarios.allocation_churn(allocations=10_000, swap_every=0.03).summary())
    lines.append(scenarios.sigkill_restart("slow", 1.0).summary())
    lines.append(scenarios.sigkill_restart("down", 10.0).summary())
    lines.append(scenarios.sigkill_restart("gone", 10.0).summary())
    lines += [result.summary() for result in scenarios.faults(kubelet_down=10.0)]
    lines.append(scenarios.hostile_files(limit=None).summary())
    lines.append(scenarios.signals(runs=50).summary())
    lines.append(scenarios.soak(SOAK_SECONDS, warmup=min(60.0, SOAK_SECONDS / 5)).summary())
    return lines
