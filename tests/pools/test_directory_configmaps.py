"""The mounted directory with one sub-directory per ConfigMap (a multi-volume or projected mount).

Live tests wait on ``on_change`` calls (bounded Conditions, see :class:`Recorder`) or on watcher events,
never on sleeps. The ``..data`` swap is kubelet's AtomicWriter sequence (:class:`ConfigMapVolume`).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.fswatch import DirectoryWatcher, FsEvent
from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.objects import ConfigMapObject
from tests.pools.test_directory import (
    TIMEOUT,
    ConfigMapVolume,
    Recorder,
    names,
    pools_doc,
    slices,
    write_atomic,
)

UUID = "GPU-0a1b2c3d-1111-2222-3333-444455556666"


def dkp_config(pool: str, replicas: int = 1, pattern: str = UUID) -> str:
    sharing = f"sharing:\n  timeSlicing:\n    resources:\n    - {{name: {pool}, replicas: {replicas}}}\n"
    return (
        "version: v1\nflags: {migStrategy: none, resourcePrefix: gpu.deckhouse.io}\n"
        f"resources:\n  gpus:\n  - {{pattern: '{pattern}', name: gpu.deckhouse.io/{pool}}}\n" + sharing
    )


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def make_source(recorder: Recorder) -> Iterator[Callable[..., DirectoryPoolSource]]:
    sources: list[DirectoryPoolSource] = []

    def make(directory: Path, **kwargs: object) -> DirectoryPoolSource:
        if "aggregator" not in kwargs:
            kwargs["on_change"] = recorder
        source = DirectoryPoolSource(directory, fallback_interval=0.1, **kwargs)  # type: ignore[arg-type]
        sources.append(source)
        return source

    yield make
    for source in sources:
        source.stop()


def test_subdirectories_are_configmaps_of_any_format(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "top.yaml").write_text(pools_doc("top"))
    ConfigMapVolume(tmp_path / "nvidia-device-plugin-team-a-config", {"config.yaml": dkp_config("team-a", 4)})
    ConfigMapVolume(tmp_path / "gpu-device-plugin-a100", {"DP_ALLOWED_DEVICES": "k8s-w1-0-10de-2203\n"})
    ConfigMapVolume(tmp_path / "hcs-deviceplugin-pools", {"pools.yaml": pools_doc("n1", "n2"), "README": "x"})
    plain = tmp_path / "plain"  # not a kubelet volume: files directly in the directory
    plain.mkdir()
    (plain / "pools.yaml").write_text(pools_doc("p"))
    (plain / ".pools.yaml.swp").write_text("not: [yaml")

    pools, errors = DirectoryPoolSource(tmp_path, recorder).reload()

    assert errors == []
    assert slices(pools) == {"a100": 1, "n1": 1, "n2": 1, "p": 1, "team-a": 4, "top": 1}
    sources = {p.name: p.source for p in pools.pools}
    assert sources["team-a"] == str(tmp_path / "nvidia-device-plugin-team-a-config")
    assert sources["top"] == str(tmp_path / "top.yaml")
    assert pools.by_name()["team-a"].devices[0].pattern == UUID


def test_errors_in_a_subdirectory_name_the_directory_and_the_key(tmp_path: Path, recorder: Recorder) -> None:
    ConfigMapVolume(tmp_path / "cm", {"pools.yaml": "version: v1\npools: [{name: a, slicesPerUnit: 0}]\n"})
    _, errors = DirectoryPoolSource(tmp_path, recorder).reload()
    assert [str(e) for e in errors] == [
        f"{tmp_path / 'cm'}: pools.yaml: pools[0].slicesPerUnit: must be 1..64, got 0"
    ]


def test_data_swap_inside_a_subdirectory_triggers_reload(
    tmp_path: Path, recorder: Recorder, make_source: Callable[..., DirectoryPoolSource]
) -> None:
    volume = ConfigMapVolume(
        tmp_path / "nvidia-device-plugin-team-a-config", {"config.yaml": dkp_config("team-a")}
    )
    source = make_source(tmp_path)
    source.reload()
    source.start()

    volume.update({"config.yaml": dkp_config("team-a", replicas=8)})
    pools, errors = recorder.call(0)
    assert (slices(pools), errors) == ({"team-a": 8}, [])

    volume.update({"config.yaml": dkp_config("team-a", replicas=0)})
    pools, errors = recorder.call(1)
    assert slices(pools) == {"team-a": 8}, "the broken version keeps the last good one"
    assert [e.path for e in errors] == ["config.yaml: sharing.timeSlicing.resources[0].replicas"]


def test_subdirectories_that_appear_and_disappear_are_followed(
    tmp_path: Path, recorder: Recorder, make_source: Callable[..., DirectoryPoolSource]
) -> None:
    source = make_source(tmp_path)
    source.reload()
    source.start()

    volume = ConfigMapVolume(tmp_path / "later", {"pools.yaml": pools_doc("a")})
    recorder.wait_for(lambda pools, errors: names(pools) == ["a"])
    volume.update({"pools.yaml": pools_doc("a", slices=3)})
    recorder.wait_for(lambda pools, errors: slices(pools) == {"a": 3})

    shutil.rmtree(volume.directory)
    recorder.wait_for(lambda pools, errors: names(pools) == [] and not errors)


def test_an_unreadable_key_keeps_the_previous_content(tmp_path: Path, recorder: Recorder) -> None:
    volume = ConfigMapVolume(tmp_path / "cm", {"pools.yaml": pools_doc("a", slices=2)})
    source = DirectoryPoolSource(tmp_path, recorder)
    source.reload()
    volume.update({"pools.yaml": pools_doc("a")})
    payload = volume.directory / os.readlink(volume.directory / "..data")
    (payload / "pools.yaml").write_bytes(b"version: v1\npools: [{name: \xff}]\n")
    pools, errors = source.reload()
    assert slices(pools) == {"a": 2}
    assert [(e.source, e.path) for e in errors] == [(str(payload / "pools.yaml"), "<file>")]
    assert errors[0].message == "not UTF-8: invalid start byte at byte 27"


def test_a_file_being_written_inside_a_subdirectory_is_not_read(tmp_path: Path, recorder: Recorder) -> None:
    cm = tmp_path / "cm"
    cm.mkdir()
    target = cm / "pools.yaml"
    target.write_text(pools_doc("a"))
    source = DirectoryPoolSource(tmp_path, recorder)
    source.reload()
    with target.open("w") as f:
        f.write("version: v1\npools:\n  - name: a\n    slicesPer")
        f.flush()
        source._on_events([FsEvent("cm/pools.yaml", 0x2)])  # IN_MODIFY
        assert recorder.calls == []
        f.write("Unit: 2\n")
    source._on_events([FsEvent("cm/pools.yaml", 0x8)])  # IN_CLOSE_WRITE
    pools, errors = recorder.call(0)
    assert (slices(pools), errors) == ({"a": 2}, [])


def test_shared_aggregator_prefers_the_api_copy(
    tmp_path: Path, make_source: Callable[..., DirectoryPoolSource]
) -> None:
    calls: list[PoolSet] = []
    aggregator = PoolAggregator(lambda pools, errors: calls.append(pools))
    ConfigMapVolume(tmp_path / "hcs-deviceplugin-pools", {"pools.yaml": pools_doc("a", slices=2)})
    source = make_source(tmp_path, aggregator=aggregator, namespace="ns")
    assert slices(source.reload()[0]) == {"a": 2}

    api_copy = ConfigMapObject(
        name="hcs-deviceplugin-pools",
        namespace="ns",
        data={"pools.yaml": pools_doc("a", slices=4)},
        resource_version="12",
        source="configmap ns/hcs-deviceplugin-pools",
    )
    aggregator.update("api", [api_copy])
    assert slices(source.current) == {"a": 4}, "one object, the API's newer copy; no duplicate pool"
    assert source.errors == []
    assert source.reload() == (aggregator.current, [])
    aggregator.update("api", [])
    assert slices(aggregator.current) == {"a": 2}


def test_without_the_namespace_a_subdirectory_is_another_object(tmp_path: Path) -> None:
    aggregator = PoolAggregator(lambda pools, errors: None)
    ConfigMapVolume(tmp_path / "hcs-deviceplugin-pools", {"pools.yaml": pools_doc("a")})
    DirectoryPoolSource(tmp_path, aggregator=aggregator).reload()
    api_copy = ConfigMapObject(
        name="hcs-deviceplugin-pools", namespace="ns", data={"pools.yaml": pools_doc("a")}
    )
    _, errors = aggregator.update("api", [api_copy])
    assert [e.message.split(",")[0] for e in errors] == [
        f"pool 'a' is also defined in {tmp_path / 'hcs-deviceplugin-pools'}"
    ]


def test_on_change_or_aggregator_not_both(tmp_path: Path, recorder: Recorder) -> None:
    with pytest.raises(ValueError, match="not both"):
        DirectoryPoolSource(tmp_path, recorder, aggregator=PoolAggregator(recorder))
    with pytest.raises(ValueError, match="give on_change"):
        DirectoryPoolSource(tmp_path)


class Events:
    """``on_events`` of a DirectoryWatcher: collects events, lets a test wait for one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.events: list[FsEvent] = []

    def __call__(self, events: list[FsEvent]) -> None:
        with self._cond:
            self.events += events
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[FsEvent], bool]) -> FsEvent:
        with self._cond:
            ok = self._cond.wait_for(lambda: any(predicate(e) for e in self.events), TIMEOUT)
            assert ok, f"no such event; got {self.events}"
            return next(e for e in self.events if predicate(e))

    def clear(self) -> None:
        with self._cond:
            self.events.clear()


def test_tree_watcher_reports_swaps_inside_watched_subdirectories(tmp_path: Path) -> None:
    events = Events()
    watcher = DirectoryWatcher(tmp_path, events, fallback_interval=0.1)
    watcher.start()
    try:
        assert watcher.inotify_available
        volume = ConfigMapVolume(tmp_path / "cm", {"config.yaml": "a"})
        events.wait_for(lambda e: e.name == "cm" and e.created)
        watcher.watch_subdirectories(["cm"])
        assert watcher.watched_subdirectories() == {"cm"}
        volume.update({"config.yaml": "b"})
        events.wait_for(lambda e: e.name == "cm/..data" and e.created)

        watcher.watch_subdirectories([])
        assert watcher.watched_subdirectories() == set()
        events.clear()
        volume.update({"config.yaml": "c"})
        write_atomic(tmp_path / "marker.yaml", "x")
        events.wait_for(lambda e: e.name == "marker.yaml")
        assert not [e for e in events.events if e.name.startswith("cm/")], "an unwatched directory is silent"

        watcher.watch_subdirectories(["cm"])
        shutil.rmtree(volume.directory)
        events.wait_for(lambda e: e.name == "cm" and e.removed)
        assert watcher.watched_subdirectories() in (set(), {"cm"})
        watcher.watch_subdirectories([])
    finally:
        watcher.stop()


def test_tree_watcher_ignores_subdirectories_that_are_gone(tmp_path: Path) -> None:
    watcher = DirectoryWatcher(tmp_path, lambda events: None, fallback_interval=0.1)
    watcher.start()
    try:
        watcher.watch_subdirectories(["missing"])
        assert watcher.watched_subdirectories() == set()
    finally:
        watcher.stop()
