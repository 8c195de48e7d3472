"""The mounted-directory pool source: per-file last good versions, merging, and live reload.

Live tests wait on the ``on_change`` calls themselves (a Condition with a bounded timeout). To show
that something did *not* notify, they make one more, different change afterwards and check that the
next call is that change's: inotify delivers events in order, so a spurious call would come first.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.fswatch import IN_CLOSE_WRITE, IN_MODIFY, FsEvent
from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.errors import ConfigError

TIMEOUT = 5.0

Call = tuple[PoolSet, list[ConfigError]]


class Recorder:
    """The ``on_change`` callback: records calls and lets a test wait for the one it expects."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.calls: list[Call] = []

    def __call__(self, pools: PoolSet, errors: list[ConfigError]) -> None:
        with self._cond:
            self.calls.append((pools, errors))
            self._cond.notify_all()

    def count(self) -> int:
        with self._cond:
            return len(self.calls)

    def call(self, index: int) -> Call:
        """The call number ``index`` (0-based), waiting for it to happen."""
        with self._cond:
            ok = self._cond.wait_for(lambda: len(self.calls) > index, TIMEOUT)
            assert ok, f"on_change call #{index} did not come; calls so far: {self.calls}"
            return self.calls[index]

    def wait_for(self, predicate: Callable[[PoolSet, list[ConfigError]], bool]) -> Call:
        """The first call from now on (or the latest so far) whose state satisfies ``predicate``."""
        with self._cond:
            ok = self._cond.wait_for(lambda: bool(self.calls) and predicate(*self.calls[-1]), TIMEOUT)
            assert ok, f"no on_change call matched; last: {self.calls[-1:]}"
            return self.calls[-1]


def pools_doc(*names: str, slices: int = 1) -> str:
    body = "".join(f"  - name: {n}\n    slicesPerUnit: {slices}\n" for n in names)
    return f"version: v1\npools:\n{body}" if names else "version: v1\npools: []\n"


BROKEN_SLICES = "version: v1\npools:\n  - name: a\n    slicesPerUnit: 0\n"


def write_atomic(path: Path, text: str) -> None:
    """Write as careful tools do: a hidden temporary file renamed over the target."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def names(pools: PoolSet) -> list[str]:
    return pools.names()


def slices(pools: PoolSet) -> dict[str, int]:
    return {p.name: p.slices_per_unit for p in pools.pools}


class ConfigMapVolume:
    """A directory laid out and updated exactly as kubelet's AtomicWriter does for a ConfigMap volume.

    ``dir/..<timestamp>/<key>`` holds the data, ``dir/..data -> ..<timestamp>``, and each key is a
    symlink ``dir/<key> -> ..data/<key>``. An update writes a new timestamped directory, points
    ``..data_tmp`` at it, renames that over ``..data``, adds or removes the key symlinks, and removes
    the old directory.
    """

    _serial = itertools.count()

    def __init__(self, directory: Path, files: dict[str, str]) -> None:
        self.directory = directory
        directory.mkdir(exist_ok=True)
        self._keys: set[str] = set()
        self._current: Path | None = None
        self.update(files)

    def update(self, files: dict[str, str]) -> None:
        stamp = self.directory / f"..2026_11_23_10_00_00.{next(self._serial)}"
        stamp.mkdir()
        for key, text in files.items():
            (stamp / key).write_text(text)
        tmp = self.directory / "..data_tmp"
        tmp.symlink_to(stamp.name)
        os.rename(tmp, self.directory / "..data")
        for key in files.keys() - self._keys:
            (self.directory / key).symlink_to(f"..data/{key}")
        for key in self._keys - files.keys():
            (self.directory / key).unlink()
        if self._current is not None:
            shutil.rmtree(self._current)
        self._current, self._keys = stamp, set(files)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def make_source(recorder: Recorder) -> Iterator[Callable[[Path], DirectoryPoolSource]]:
    sources: list[DirectoryPoolSource] = []

    def make(directory: Path) -> DirectoryPoolSource:
        # A short fallback interval only makes stop() quick (the watcher thread wakes to see it).
        source = DirectoryPoolSource(directory, recorder, fallback_interval=0.1)
        sources.append(source)
        return source

    yield make
    for source in sources:
        source.stop()


def test_initial_load_reads_only_pool_files(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "a.yaml").write_text(pools_doc("a"))
    (tmp_path / "b.yml").write_text(pools_doc("b"))
    (tmp_path / "c.json").write_text('{"version": "v1", "pools": [{"name": "c"}]}')
    (tmp_path / "..target").mkdir()
    (tmp_path / "..target" / "d.yaml").write_text(pools_doc("d"))
    (tmp_path / "d.yaml").symlink_to("..target/d.yaml")
    # None of these is read: each would be an error (or a pool) if it were.
    (tmp_path / "pools").write_text(pools_doc("no-extension"))
    (tmp_path / "README").write_text("not: [yaml")
    (tmp_path / "notes.txt").write_text("not: [yaml")
    (tmp_path / ".hidden.yaml").write_text("not: [yaml")
    # A directory or dangling link named like a pool file is an error now: tests/pools/test_special_files.py.

    source = DirectoryPoolSource(tmp_path, recorder)
    pools, errors = source.reload()

    assert errors == []
    assert names(pools) == ["a", "b", "c", "d"]
    assert {p.name: p.source for p in pools.pools} == {
        "a": str(tmp_path / "a.yaml"),
        "b": str(tmp_path / "b.yml"),
        "c": str(tmp_path / "c.json"),
        "d": str(tmp_path / "d.yaml"),
    }
    assert (source.current, source.errors) == (pools, [])
    assert recorder.calls == [], "reload() returns the state; it does not call on_change"


def test_start_reports_initial_state_when_not_reloaded(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    (tmp_path / "a.yaml").write_text(pools_doc("a"))
    make_source(tmp_path).start()
    pools, errors = recorder.call(0)
    assert (names(pools), errors) == (["a"], [])


def test_add_modify_remove_file(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    (tmp_path / "a.yaml").write_text(pools_doc("a"))
    source = make_source(tmp_path)
    source.reload()
    source.start()

    write_atomic(tmp_path / "b.yaml", pools_doc("b"))
    assert recorder.call(0) == (source.current, [])
    assert names(source.current) == ["a", "b"]

    write_atomic(tmp_path / "b.yaml", pools_doc("b", "b2", slices=4))
    pools, errors = recorder.call(1)
    assert (slices(pools), errors) == ({"a": 1, "b": 4, "b2": 4}, [])

    (tmp_path / "b.yaml").unlink()
    pools, errors = recorder.call(2)
    assert (names(pools), errors) == (["a"], [])


def test_in_place_edit_is_picked_up(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    target = tmp_path / "a.yaml"
    target.write_text(pools_doc("a"))
    source = make_source(tmp_path)
    source.reload()
    source.start()
    target.write_text(pools_doc("a", slices=8))
    recorder.wait_for(lambda pools, errors: slices(pools) == {"a": 8} and not errors)


def test_broken_file_keeps_last_good_until_fixed(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(pools_doc("a", slices=2))
    b.write_text(pools_doc("b"))
    source = make_source(tmp_path)
    good, _ = source.reload()
    source.start()

    write_atomic(a, BROKEN_SLICES)
    pools, errors = recorder.call(0)
    assert pools == good, "a.yaml keeps its last good version"
    assert [(e.source, e.path) for e in errors] == [(str(a), "pools[0].slicesPerUnit")]
    assert "1..64, got 0" in errors[0].message
    assert source.errors == errors

    write_atomic(b, pools_doc("b", "b2"))
    pools, errors = recorder.call(1)
    assert (slices(pools), [e.source for e in errors]) == ({"a": 2, "b": 1, "b2": 1}, [str(a)])

    write_atomic(a, pools_doc("a", slices=3))
    pools, errors = recorder.call(2)
    assert (slices(pools), errors) == ({"a": 3, "b": 1, "b2": 1}, [])


def test_file_that_never_parsed_contributes_nothing(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "a.yaml").write_text(pools_doc("a"))
    (tmp_path / "new.yaml").write_text("version: v1\npools:\n  - name: [x\n")
    pools, errors = DirectoryPoolSource(tmp_path, recorder).reload()
    assert names(pools) == ["a"]
    assert [(e.source, e.path) for e in errors] == [(str(tmp_path / "new.yaml"), "<document>")]
    assert "line 4" in errors[0].message


def test_configmap_symlink_swap_triggers_reload(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    volume = ConfigMapVolume(tmp_path / "cm", {"pools.yaml": pools_doc("a")})
    source = make_source(volume.directory)
    pools, _ = source.reload()
    assert names(pools) == ["a"]
    assert pools.pools[0].source == str(volume.directory / "pools.yaml")
    source.start()

    volume.update({"pools.yaml": pools_doc("a", "b", slices=2)})
    pools, errors = recorder.call(0)
    assert (slices(pools), errors) == ({"a": 2, "b": 2}, [])

    volume.update({"pools.yaml": pools_doc("a", "b", slices=2), "more.yaml": pools_doc("c")})
    recorder.wait_for(lambda pools, errors: names(pools) == ["a", "b", "c"] and not errors)

    volume.update({"more.yaml": pools_doc("c")})
    recorder.wait_for(lambda pools, errors: names(pools) == ["c"] and not errors)


def test_identical_rewrite_does_not_notify(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(pools_doc("p"))
    volume = ConfigMapVolume(tmp_path / "cm", {"pools.yaml": pools_doc("a")})
    os.symlink(volume.directory / "pools.yaml", tmp_path / "cm.yaml")
    source = make_source(tmp_path)
    source.reload()
    source.start()

    with plain.open("r+") as f:  # same bytes over the same bytes: modify + close-write, no change
        f.write(pools_doc("p"))
    os.utime(plain)
    write_atomic(plain, pools_doc("p"))
    volume.update({"pools.yaml": pools_doc("a")})
    write_atomic(tmp_path / "marker.yaml", pools_doc("marker"))

    pools, _ = recorder.call(0)
    assert names(pools) == ["a", "marker", "p"]
    assert recorder.count() == 1


def test_start_after_reload_does_not_repeat_state(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    (tmp_path / "a.yaml").write_text(pools_doc("a"))
    source = make_source(tmp_path)
    source.reload()
    source.start()
    write_atomic(tmp_path / "marker.yaml", pools_doc("marker"))
    assert names(recorder.call(0)[0]) == ["a", "marker"]
    assert recorder.count() == 1


def test_pool_defined_in_two_files(
    tmp_path: Path, recorder: Recorder, make_source: Callable[[Path], DirectoryPoolSource]
) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(pools_doc("x", "y"))
    b.write_text(pools_doc("z", "x", slices=2))
    source = make_source(tmp_path)
    pools, errors = source.reload()

    assert slices(pools) == {"x": 1, "y": 1, "z": 2}
    assert pools.by_name()["x"].source == str(a)
    [error] = errors
    assert (error.source, error.path) == (str(b), "pools[1].name")
    assert str(a) in error.message

    source.start()
    write_atomic(a, pools_doc("y"))
    pools, errors = recorder.call(0)
    assert (slices(pools), errors) == ({"x": 2, "y": 1, "z": 2}, [])
    assert pools.by_name()["x"].source == str(b)


def test_missing_directory_is_no_pools_and_is_logged(
    tmp_path: Path,
    recorder: Recorder,
    make_source: Callable[[Path], DirectoryPoolSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    directory = tmp_path / "not-mounted"
    source = make_source(directory)
    with caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools"):
        assert source.reload() == (PoolSet(), [])
    assert any(
        str(directory) in r.getMessage() and "does not exist" in r.getMessage() for r in caplog.records
    )

    source.start()  # the watcher creates the directory; files that appear later are read
    write_atomic(directory / "a.yaml", pools_doc("a"))
    pools, errors = recorder.call(0)
    assert (names(pools), errors) == (["a"], [])


def test_errors_are_logged_once_with_source_path_and_reason(
    tmp_path: Path, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a.yaml").write_text(BROKEN_SLICES)
    source = DirectoryPoolSource(tmp_path, recorder)
    with caplog.at_level(logging.INFO, logger="hcs_deviceplugin.pools"):
        source.reload()
        source.reload()
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged == [
        f"pool config error: {tmp_path / 'a.yaml'}: pools[0].slicesPerUnit: must be 1..64, got 0"
    ]


def test_file_being_written_is_not_read_until_closed(tmp_path: Path, recorder: Recorder) -> None:
    target = tmp_path / "a.yaml"
    target.write_text(pools_doc("a"))
    source = DirectoryPoolSource(tmp_path, recorder)
    source.reload()
    with target.open("w") as f:  # truncated and half written, as an editor saving in place
        f.write("version: v1\npools:\n  - name: a\n    slicesPer")
        f.flush()
        source._on_events([FsEvent("a.yaml", IN_MODIFY)])
        assert recorder.calls == []
        f.write("Unit: 2\n")
    source._on_events([FsEvent("a.yaml", IN_CLOSE_WRITE)])
    pools, errors = recorder.call(0)
    assert (slices(pools), errors) == ({"a": 2}, [])


def test_each_reread_of_a_mounted_configmap_is_reported_as_a_reload(tmp_path: Path) -> None:
    """``hcs_config_reloads_total{source="file"}`` counts these: every kubelet update after the first read."""
    reloads = threading.Semaphore(0)
    recorder = Recorder()
    volume = ConfigMapVolume(tmp_path / "pools", {"pools.yaml": pools_doc("a")})
    source = DirectoryPoolSource(volume.directory, recorder, fallback_interval=0.1, on_reload=reloads.release)
    source.start()
    try:
        recorder.wait_for(lambda pools, _errors: names(pools) == ["a"])
        assert not reloads.acquire(blocking=False), "the first read is a load, not a reload"
        volume.update({"pools.yaml": pools_doc("a", "b")})
        recorder.wait_for(lambda pools, _errors: names(pools) == ["a", "b"])
        assert reloads.acquire(timeout=TIMEOUT), "the update's re-read counts"
    finally:
        source.stop()
