"""Writing files the way kubelet updates a mounted ConfigMap volume.

Kubelet's atomic writer puts the data in a fresh timestamped directory, points a ``..data_tmp``
symlink at it, renames that over ``..data`` and keeps one user-visible symlink per key pointing
into ``..data``. Readers therefore never see a half-written file, and a watcher sees the swap as a
rename in the directory, not a write to the file. Used by ``simulate`` and by tests to exercise the
real update path.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path


def write_configmap_volume(directory: Path, files: Mapping[str, str]) -> None:
    """Atomically replace the volume's content with ``files`` (key → text)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.") + f"{time.monotonic_ns()}"
    payload = directory / stamp
    payload.mkdir()
    for key, text in files.items():
        (payload / key).write_text(text)
    data = directory / "..data"
    old_target = os.readlink(data) if data.is_symlink() else None
    tmp = directory / "..data_tmp"
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(stamp)
    os.replace(tmp, data)
    for key in files:
        link = directory / key
        if not link.is_symlink():
            if link.exists():
                link.unlink()
            link.symlink_to(Path("..data") / key)
    for entry in directory.iterdir():
        if entry.is_symlink() and not entry.name.startswith(".") and entry.name not in files:
            entry.unlink()
    if old_target is not None and old_target != stamp:
        shutil.rmtree(directory / old_target, ignore_errors=True)
