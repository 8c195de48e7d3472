"""Hostile pool files: time to refuse each one and the process's peak memory (issue #15, item 3).

Every document of ``tests.pools.hostile`` (1,260 in 21 kinds: bombs, deep nesting, 10 MB files,
binary garbage, huge integers, long keys, many pools, many device entries...) and every special file
(FIFO, directory, dangling link, ``/dev/zero``, socket, sparse 10 GB) replaces ``pools.yaml`` in a
mounted pools directory next to a good file, and the directory source reloads: one sample is that
reload, from the rename to the refusal. Each must keep the last good pools and name the file.

It runs in a fresh subprocess, so its peak RSS (``VmHWM``) is this work's alone, not what earlier
benches left behind. Lines: all refusals, the slowest kinds, then peak RSS and failures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench.common import Result

WORKER = "bench.hostile_pools_bench"
SLOWEST_KINDS = 4
SPECIAL_ROUNDS = 20
"""Times each special file is put in place (they are quick; this gives them a median)."""


def run() -> list[str]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", WORKER],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        return [f"hostile pools: worker failed ({done.returncode}): {done.stderr.strip()[-500:]}"]
    report = json.loads(done.stdout.splitlines()[-1])
    samples: dict[str, list[float]] = report["samples"]
    every = [s for values in samples.values() for s in values]
    lines = [Result(f"hostile pools: refuse one of {len(every)} files", every).line()]
    by_p99 = sorted(samples, key=lambda kind: max(samples[kind]), reverse=True)
    for kind in by_p99[:SLOWEST_KINDS]:
        lines.append(Result(f"  slowest kinds: {kind}", samples[kind]).line())
    lines.append(
        f"{'hostile pools: peak RSS (VmHWM) of the process':<52} {report['peak_kib'] / 1024:8.1f} MiB"
    )
    failures = report["failures"]
    lines.append(f"{'hostile pools: last good lost or error unnamed':<52} {len(failures):>8} file(s)")
    lines += [f"  {failure}" for failure in failures[:10]]
    return lines


def _worker() -> None:
    """Runs in the subprocess: feed every hostile file to a directory source, print JSON."""
    import logging
    import tempfile
    import time

    from hcs_deviceplugin.pools.directory import DirectoryPoolSource
    from tests.pools.hostile import (
        SPECIAL_KINDS,
        expected_reason,
        hostile_documents,
        kind_of,
        make_special_file,
        special_applies,
        special_reason,
        write_atomically,
    )

    logging.disable(logging.CRITICAL)
    samples: dict[str, list[float]] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hcs-hostile-") as tmp:
        directory = Path(tmp)
        (directory / "good.yaml").write_text("version: v1\npools:\n- name: good\n")
        source = DirectoryPoolSource(directory, lambda pools, errors: None)
        source.reload()

        def measure(kind: str, path: Path, reason: str, place: Callable[[], object]) -> None:
            start = time.perf_counter()
            place()  # the write (or mkfifo) is part of the change, as a kubelet swap is
            pools, errors = source.reload()
            samples.setdefault(kind, []).append(time.perf_counter() - start)
            names = [pool.name for pool in pools.pools]
            if names != ["good"] or not any(e.source == str(path) and reason in e.message for e in errors):
                failures.append(f"{path.name}: pools {names}, errors {[str(e)[:160] for e in errors]}")
            _remove(path)
            source.reload()

        for name, content in hostile_documents():
            path = directory / ("pools" + Path(name).suffix)
            measure(kind_of(name), path, expected_reason(name), partial(write_atomically, path, content))
        path = directory / "pools.yaml"
        for kind in SPECIAL_KINDS:
            for _ in range(SPECIAL_ROUNDS if special_applies(kind) else 0):
                measure(f"special:{kind}", path, special_reason(kind), partial(make_special_file, path, kind))
    peak = _vm_hwm_kib()
    print(json.dumps({"samples": samples, "failures": failures, "peak_kib": peak}))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    else:
        path.unlink()


def _vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    import resource  # no /proc: ru_maxrss is the same figure, in KiB on Linux

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    _worker()
