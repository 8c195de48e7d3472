"""Spec files: atomic, only ours touched, stale ones removed, and no partial file ever visible."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from hcs_deviceplugin.cdi.files import SpecDirectory, render
from tests.cdi.runtime import CdiRegistry


def spec(kind: str, *names: str) -> dict[str, object]:
    return {
        "cdiVersion": "0.5.0",
        "kind": kind,
        "devices": [{"name": n, "containerEdits": {"deviceNodes": [{"path": f"/dev/{n}"}]}} for n in names],
    }


GPU = spec("hcs.deckhouse.io/gpu", "a", "b")
NPU = spec("hcs.deckhouse.io/npu", "c")


def test_sync_writes_one_file_per_backend_and_removes_only_ours(tmp_path: Path) -> None:
    foreign = tmp_path / "nvidia.yaml"
    foreign.write_text(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: all, containerEdits: {env: [A=1]}}]\n"
    )
    lookalike = tmp_path / "hcs-deviceplugin-notes.txt"
    lookalike.write_text("not a spec")
    files = SpecDirectory(tmp_path)
    assert files.sync({"nvidia": GPU, "ascend": NPU}) == [
        "wrote hcs-deviceplugin-ascend.json",
        "wrote hcs-deviceplugin-nvidia.json",
    ]
    assert json.loads((tmp_path / "hcs-deviceplugin-nvidia.json").read_text()) == GPU
    assert files.sync({"nvidia": GPU}) == ["removed hcs-deviceplugin-ascend.json"]
    assert foreign.exists() and lookalike.exists()
    assert sorted(CdiRegistry.load(tmp_path).devices) == [
        "hcs.deckhouse.io/gpu=a",
        "hcs.deckhouse.io/gpu=b",
        "nvidia.com/gpu=all",
    ]


def test_an_unchanged_spec_is_not_rewritten(tmp_path: Path) -> None:
    files = SpecDirectory(tmp_path)
    files.sync({"nvidia": GPU})
    path = tmp_path / "hcs-deviceplugin-nvidia.json"
    before = os.stat(path).st_ino
    assert files.sync({"nvidia": GPU}) == []
    assert os.stat(path).st_ino == before


def test_kept_backends_keep_their_file(tmp_path: Path) -> None:
    files = SpecDirectory(tmp_path)
    files.sync({"nvidia": GPU, "ascend": NPU})
    assert files.sync({"nvidia": GPU}, keep=["ascend"]) == []
    assert (tmp_path / "hcs-deviceplugin-ascend.json").exists()


def test_files_are_world_readable_and_the_directory_is_created(tmp_path: Path) -> None:
    files = SpecDirectory(tmp_path / "run" / "cdi")
    files.sync({"nvidia": GPU})
    assert (os.stat(tmp_path / "run" / "cdi" / "hcs-deviceplugin-nvidia.json").st_mode & 0o777) == 0o644


def test_temp_files_left_by_a_killed_writer_are_removed_and_nothing_else(tmp_path: Path) -> None:
    ours = tmp_path / ".hcs-deviceplugin-nvidia.json.123.abcd.tmp"
    ours.write_text('{"cdiVersion": "0.5.0", "ki')
    theirs = tmp_path / ".nvidia.json.tmp"
    theirs.write_text("x")
    assert SpecDirectory(tmp_path).remove_temp_files() == [ours]
    assert theirs.exists()


def test_readers_never_see_a_partial_spec_while_two_writers_race(tmp_path: Path) -> None:
    """Two writers (say, a daemon and its restarted successor) alternate two specs as fast as they can;
    a reader that loads the directory meanwhile always finds one whole spec or the other."""
    big = spec("hcs.deckhouse.io/gpu", *(f"card{i}" for i in range(400)))
    small = spec("hcs.deckhouse.io/gpu", "only")
    wanted = {render(big), render(small)}
    stop = threading.Event()
    errors: list[str] = []

    def write(first: dict[str, object], second: dict[str, object]) -> None:
        files = SpecDirectory(tmp_path)
        while not stop.is_set():
            files.sync({"nvidia": first})
            files.sync({"nvidia": second})

    writers = [threading.Thread(target=write, args=pair) for pair in ((big, small), (small, big))]
    for thread in writers:
        thread.start()
    try:
        seen = 0
        while seen < 2000:
            path = tmp_path / "hcs-deviceplugin-nvidia.json"
            try:
                content = path.read_bytes()
            except FileNotFoundError:
                continue
            seen += 1
            if content not in wanted:
                errors.append(f"partial or foreign content of {len(content)} bytes")
    finally:
        stop.set()
        for thread in writers:
            thread.join(10)
    assert errors == []
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")], (
        "no temp file outlives a write"
    )
    CdiRegistry.load(tmp_path)
