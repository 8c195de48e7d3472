"""The aggregator: newest copy across sources, per-object last good parse, merging, and quiet updates."""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from collections.abc import Sequence

import pytest

from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.errors import ConfigError
from hcs_deviceplugin.pools.formats import parse_configmap_located
from hcs_deviceplugin.pools.located import LocatedPool
from hcs_deviceplugin.pools.objects import ConfigMapObject

NS = "d8-gpu-control-plane"


class Recorder:
    """``on_change``: records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[PoolSet, list[ConfigError]]] = []

    def __call__(self, pools: PoolSet, errors: list[ConfigError]) -> None:
        self.calls.append((pools, errors))


def native(name: str, *pools: str, slices: int = 1, version: str = "", source: str = "") -> ConfigMapObject:
    body = "".join(f"  - {{name: {p}, slicesPerUnit: {slices}}}\n" for p in pools)
    return ConfigMapObject(
        name=name,
        namespace=NS,
        data={"pools.yaml": f"version: v1\npools:\n{body}" if pools else "version: v1\npools: []\n"},
        resource_version=version,
        source=source or f"configmap {NS}/{name}",
    )


def broken(name: str, version: str = "", source: str = "") -> ConfigMapObject:
    return ConfigMapObject(
        name=name,
        namespace=NS,
        data={"pools.yaml": "version: v1\npools:\n  - {name: a, slicesPerUnit: 0}\n"},
        resource_version=version,
        source=source or f"configmap {NS}/{name}",
    )


def slices(pools: PoolSet) -> dict[str, int]:
    return {p.name: p.slices_per_unit for p in pools.pools}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def aggregator(recorder: Recorder) -> PoolAggregator:
    return PoolAggregator(recorder)


@pytest.mark.parametrize(
    ("file_version", "api_version", "winner"),
    [
        pytest.param("", "7", "api", id="file-has-no-version-and-loses"),
        pytest.param("10", "9", "file", id="integers-not-strings-10-beats-9"),
        pytest.param("9", "10", "api", id="integers-9-loses-to-10"),
        pytest.param("010", "9", "file", id="leading-zeros-do-not-count"),
        pytest.param("1" + "0" * 5000, "9" * 5000, "file", id="beyond-python-int-conversion-limit"),
        pytest.param("9" * 5000, "1" + "0" * 5000, "api", id="beyond-the-limit-either-way"),
    ],
)
def test_newest_resource_version_wins_across_sources(
    aggregator: PoolAggregator, file_version: str, api_version: str, winner: str
) -> None:
    from_file = native("pools", "a", slices=2, version=file_version, source="/etc/pools/pools")
    from_api = native("pools", "a", slices=3, version=api_version)
    for first, second in (("file", "api"), ("api", "file")):
        fresh = PoolAggregator(lambda pools, errors: None)
        copies = {"file": from_file, "api": from_api}
        fresh.update(first, [copies[first]])
        fresh.update(second, [copies[second]])
        assert slices(fresh.current) == {"a": 2 if winner == "file" else 3}, (first, second)


def test_the_other_copy_is_used_again_when_the_winner_goes(aggregator: PoolAggregator) -> None:
    aggregator.update("file", [native("pools", "a", slices=2, source="/etc/pools/pools")])
    aggregator.update("api", [native("pools", "a", slices=3, version="5")])
    assert slices(aggregator.current) == {"a": 3}
    aggregator.update("api", [])
    assert slices(aggregator.current) == {"a": 2}
    assert aggregator.current.pools[0].source == "/etc/pools/pools"


def test_same_source_replaces_its_own_copy_even_with_an_older_version(aggregator: PoolAggregator) -> None:
    aggregator.update("api", [native("pools", "a", slices=3, version="9")])
    aggregator.update("api", [native("pools", "a", slices=4, version="8")])  # a re-created object
    assert slices(aggregator.current) == {"a": 4}


def test_unordered_versions_go_by_arrival(aggregator: PoolAggregator) -> None:
    aggregator.update("api", [native("pools", "a", slices=3, version="x-1")])
    aggregator.update("mirror", [native("pools", "a", slices=4, version="x-0")])
    assert slices(aggregator.current) == {"a": 4}
    aggregator.update("api", [native("pools", "a", slices=5, version="x-2")])
    assert slices(aggregator.current) == {"a": 5}


def test_broken_object_keeps_its_last_good_parse_and_others_apply(
    aggregator: PoolAggregator, recorder: Recorder
) -> None:
    aggregator.update("api", [native("one", "a", slices=2), native("two", "b")])
    good = aggregator.current
    aggregator.update("api", [broken("one"), native("two", "b", "c")])
    pools, errors = recorder.calls[-1]
    assert slices(pools) == {"a": 2, "b": 1, "c": 1}, "one keeps a; two's change applies"
    assert [(e.source, e.path) for e in errors] == [
        (f"configmap {NS}/one", "pools.yaml: pools[0].slicesPerUnit")
    ]
    assert aggregator.errors == errors
    aggregator.update("api", [native("one", "a", slices=5), native("two", "b", "c")])
    assert (slices(aggregator.current), aggregator.errors) == ({"a": 5, "b": 1, "c": 1}, [])
    assert good != aggregator.current


def test_object_that_never_parsed_contributes_only_errors(aggregator: PoolAggregator) -> None:
    pools, errors = aggregator.update("api", [broken("one"), native("two", "b")])
    assert (slices(pools), len(errors)) == ({"b": 1}, 1)


def test_removed_object_takes_its_pools_even_while_broken(aggregator: PoolAggregator) -> None:
    aggregator.update("api", [native("one", "a"), native("two", "b")])
    aggregator.update("api", [broken("one"), native("two", "b")])
    pools, errors = aggregator.update("api", [native("two", "b")])
    assert (slices(pools), errors) == ({"b": 1}, [])


def test_pool_defined_by_two_objects(aggregator: PoolAggregator) -> None:
    pools, errors = aggregator.update("api", [native("zz", "x", "z", slices=2), native("aa", "x", "y")])
    assert slices(pools) == {"x": 1, "y": 1, "z": 2}
    assert pools.by_name()["x"].source == f"configmap {NS}/aa"
    [error] = errors
    assert (error.source, error.path) == (f"configmap {NS}/zz", "pools.yaml: pools[0].name")
    assert (
        error.message
        == f"pool 'x' is also defined in configmap {NS}/aa, which wins; this definition is ignored"
    )
    assert aggregator.errors_by_object() == {("api", f"{NS}/zz"): [error]}


def test_pool_defined_by_dkp_and_native_objects(aggregator: PoolAggregator) -> None:
    dkp = ConfigMapObject(
        name="nvidia-device-plugin-x-config",
        namespace=NS,
        data={"config.yaml": "resources: {gpus: [{pattern: GPU-1, name: x}]}\n"},
        labels={"app": "nvidia-device-plugin"},
        source="configmap dkp",
    )
    _, errors = aggregator.update("api", [native("hcs-deviceplugin-pools", "x"), dkp])
    assert [(e.source, e.path) for e in errors] == [("configmap dkp", "config.yaml: resources.gpus[0].name")]


def test_no_on_change_for_identical_input(aggregator: PoolAggregator, recorder: Recorder) -> None:
    objects = [native("one", "a"), broken("two")]
    aggregator.update("api", objects)
    assert len(recorder.calls) == 1
    aggregator.update("api", objects)
    aggregator.update("api", [native("one", "a"), broken("two")])  # equal values, new instances
    aggregator.update("api", [native("one", "a", version="99"), broken("two", version="3")])  # re-list
    aggregator.update("file", [])
    assert len(recorder.calls) == 1


def test_no_on_change_for_an_empty_start(aggregator: PoolAggregator, recorder: Recorder) -> None:
    assert aggregator.update("file", []) == (PoolSet(), [])
    assert recorder.calls == []


def test_notify_false_returns_the_state_and_counts_as_reported(
    aggregator: PoolAggregator, recorder: Recorder
) -> None:
    pools, errors = aggregator.update("file", [native("one", "a")], notify=False)
    assert (slices(pools), errors, recorder.calls) == ({"a": 1}, [], [])
    aggregator.update("file", [native("one", "a")])
    assert recorder.calls == []


def test_unchanged_objects_are_not_parsed_again(recorder: Recorder) -> None:
    parsed: list[str] = []

    def counting(obj: ConfigMapObject) -> Sequence[LocatedPool]:
        parsed.append(obj.name)
        return parse_configmap_located(obj)

    aggregator = PoolAggregator(recorder, parser=counting)
    aggregator.update("api", [native("one", "a"), native("two", "b")])
    aggregator.update("api", [native("one", "a", version="2"), native("two", "b", slices=2)])
    assert parsed == ["one", "two", "two"]


def test_source_errors_are_reported_and_keyed_by_source(
    aggregator: PoolAggregator, recorder: Recorder
) -> None:
    failure = ConfigError("/etc/pools", "<directory>", "cannot list: Permission denied")
    aggregator.update("file", [native("one", "a")], errors=[failure])
    assert recorder.calls[-1] == (aggregator.current, [failure])
    assert aggregator.errors_by_object() == {("file", "/etc/pools"): [failure]}
    aggregator.update("file", [native("one", "a")])
    assert (aggregator.errors, aggregator.errors_by_object()) == ([], {})


def test_errors_by_object_name_the_source_of_the_winning_copy(aggregator: PoolAggregator) -> None:
    aggregator.update("file", [broken("one", source="/etc/pools/one")])
    assert list(aggregator.errors_by_object()) == [("file", f"{NS}/one")]
    aggregator.update("api", [broken("one", version="3")])
    assert list(aggregator.errors_by_object()) == [("api", f"{NS}/one")]


def test_a_parser_bug_is_an_error_of_that_object_only(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    def flaky(obj: ConfigMapObject) -> Sequence[LocatedPool]:
        if obj.name == "bad":
            raise RuntimeError("boom")
        return parse_configmap_located(obj)

    aggregator = PoolAggregator(recorder, parser=flaky)
    with caplog.at_level(logging.ERROR, logger="hcs_deviceplugin.pools"):
        pools, errors = aggregator.update("api", [native("bad", "x"), native("good", "a")])
    assert slices(pools) == {"a": 1}
    assert [(e.path, e.message) for e in errors] == [
        ("<document>", "internal error while parsing: RuntimeError('boom')")
    ]
    assert "parsing configmap d8-gpu-control-plane/bad failed unexpectedly" in caplog.text


def test_a_failing_handler_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def handler(pools: PoolSet, errors: list[ConfigError]) -> None:
        raise RuntimeError("handler broke")

    aggregator = PoolAggregator(handler)
    with caplog.at_level(logging.ERROR, logger="hcs_deviceplugin.pools"):
        pools, _ = aggregator.update("api", [native("one", "a")])
    assert slices(pools) == {"a": 1}
    assert "pool change handler failed" in caplog.text


def test_changes_and_errors_are_logged_once(
    aggregator: PoolAggregator, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="hcs_deviceplugin.pools"):
        aggregator.update("api", [native("one", "a")])
        aggregator.update("api", [native("one", "a"), broken("two")])
        aggregator.update("api", [native("one", "a"), broken("two")])
        aggregator.update("api", [native("one", "b")])
    messages = [r.getMessage() for r in caplog.records]
    error = f"configmap {NS}/two: pools.yaml: pools[0].slicesPerUnit: must be 1..64, got 0"
    assert messages == [
        "pools: added ['a'], removed none, changed none",
        f"pool config error: {error}",
        f"pool config error resolved: {error}",
        "pools: added ['b'], removed ['a'], changed none",
    ]


def test_concurrent_sources_end_in_the_state_of_the_last_update(recorder: Recorder) -> None:
    aggregator = PoolAggregator(recorder)
    barrier = threading.Barrier(2)

    def run(source: str, name: str) -> None:
        barrier.wait()
        for n in range(1, 51):
            aggregator.update(source, [native(name, name, slices=n)])

    threads = [threading.Thread(target=run, args=(s, n)) for s, n in (("file", "f"), ("api", "g"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert slices(aggregator.current) == {"f": 50, "g": 50}
    assert recorder.calls[-1][0] == aggregator.current, "notifications arrive in the order states were made"


def test_a_refused_object_is_freed_when_it_goes_without_the_cycle_collector() -> None:
    """The parse failure's traceback reaches the aggregator's frames; kept in one of them it would
    make a cycle holding the object (a 1 MiB hostile text, say) until a full collection."""
    aggregator = PoolAggregator(lambda pools, errors: None)
    obj = broken("bad")
    gone = weakref.ref(obj)
    enabled = gc.isenabled()
    gc.disable()
    try:
        aggregator.update("api", [obj])
        aggregator.update("api", [])
        del obj
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
