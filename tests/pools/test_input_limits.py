"""Pool input limits (issue #15, item 3): hostile documents are refused cheaply, each error names the
file and the reason, and the object keeps its last good pools.

Documents come from :mod:`tests.pools.hostile` and go through the real mounted-directory source on
real files. Cost is bounded by sizes, not clocks: a test fails on its timeout mark when a quadratic
path or an expansion comes back, and memory is measured with ``tracemalloc``.
"""

from __future__ import annotations

import logging
import tracemalloc
from pathlib import Path

import pytest

from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.dkp import parse_dkp_plugin_config
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.limits import MAX_DOCUMENT_BYTES, MAX_ERRORS_PER_OBJECT
from hcs_deviceplugin.pools.native import parse_native
from hcs_deviceplugin.pools.objects import ConfigMapObject
from tests.pools.hostile import (
    DEFAULT_VARIANTS,
    KINDS,
    expected_reason,
    hostile_document,
    hostile_documents,
    write_atomically,
)

GOOD_YAML = "version: v1\npools:\n- name: good\n"
GOOD_JSON = '{"version": "v1", "pools": [{"name": "good"}]}'


def names(pools: PoolSet) -> list[str]:
    return [pool.name for pool in pools.pools]


def ignore(pools: PoolSet, errors: list[ConfigError]) -> None:
    """``on_change`` of sources that are only reloaded by hand."""


def good_source(directory: Path, file_name: str) -> tuple[DirectoryPoolSource, Path]:
    """A source over ``directory`` whose ``file_name`` holds the good pool, loaded once."""
    path = directory / file_name
    path.write_text(GOOD_JSON if file_name.endswith(".json") else GOOD_YAML)
    source = DirectoryPoolSource(directory, ignore)
    pools, errors = source.reload()
    assert (names(pools), errors) == (["good"], [])
    return source, path


def assert_refused_keeping_good(
    pools: PoolSet, errors: list[ConfigError], path: Path, reason: str
) -> ConfigError:
    assert names(pools) == ["good"], f"{path.name}: the last good pools were not kept"
    mine = [e for e in errors if e.source == str(path)]
    assert mine, f"no error names {path}: {errors}"
    assert any(reason in e.message for e in mine), f"{reason!r} not in {[e.message for e in mine]}"
    return mine[0]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", KINDS)
def test_every_hostile_kind_is_refused_naming_file_and_reason_and_keeps_last_good(
    tmp_path: Path, kind: str
) -> None:
    for variant in (0, DEFAULT_VARIANTS - 1):  # the smallest and the largest of the kind
        name, content = hostile_document(kind, variant)
        source, path = good_source(tmp_path, "pools" + Path(name).suffix)
        write_atomically(path, content)
        pools, errors = source.reload()
        assert_refused_keeping_good(pools, errors, path, expected_reason(name))
        path.unlink()


def test_the_generator_yields_over_a_thousand_distinct_documents() -> None:
    seen = {name: len(content) for name, content in hostile_documents()}
    assert len(seen) >= 1000
    assert {name.rsplit("-", 1)[0] for name in seen} == set(KINDS)
    assert max(seen.values()) >= 10_000_000


def test_aliases_are_refused_even_where_the_expanded_document_would_be_valid() -> None:
    # Expanded, this is two valid pools; only the anchor/alias check refuses it.
    text = "version: v1\npools:\n- name: a\n  devices: &cards [{uuid: GPU-1}]\n- name: b\n  devices: *cards\n"
    with pytest.raises(ConfigErrors) as refused:
        parse_native(text, "/pools/pools.yaml")
    assert [str(e) for e in refused.value.errors] == [
        "/pools/pools.yaml: <document>: refused at line 4, column 12: anchor &cards: "
        "anchors, aliases and merge keys (&name, *name, <<) are not allowed in pool documents"
    ]


def test_an_alias_without_its_anchor_is_refused_as_an_alias() -> None:
    with pytest.raises(ConfigErrors, match=r"line 2, column 8: alias \*cards: anchors, aliases"):
        parse_native("version: v1\npools: *cards\n", "p.yaml")


@pytest.mark.parametrize("kind", ["alias-bomb", "merge-bomb", "lists-100-deep", "many-nodes"])
def test_bombs_are_refused_in_bounded_memory(kind: str) -> None:
    name, content = hostile_document(kind, DEFAULT_VARIANTS - 1)
    text = content.decode()
    tracemalloc.start()
    try:
        with pytest.raises(ConfigErrors, match=expected_reason(name)):
            parse_native(text, name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"{name}: {peak / 2**20:.1f} MiB while refusing"


@pytest.mark.timeout(10)
def test_refusing_20000_device_entries_is_linear() -> None:
    # Every second entry repeats an earlier card: 10,000 errors. Comparing each entry with every
    # earlier one (as before) is 200 million comparisons, minutes; an index makes it one pass.
    entries = "".join(f"  - uuid: GPU-{n % 10_000:08d}\n" for n in range(20_000))
    text = "version: v1\npools:\n- name: big\n  devices:\n" + entries
    assert len(text) < MAX_DOCUMENT_BYTES
    with pytest.raises(ConfigErrors) as refused:
        parse_native(text, "big.yaml")
    errors = refused.value.errors
    assert len(errors) == 10_000
    assert str(errors[0]) == (
        "big.yaml: pools[0].devices[10000]: names the same card as pools[0].devices[0] (uuid=GPU-00000000)"
    )


@pytest.mark.timeout(10)
def test_node_restricted_entries_are_checked_with_the_same_rule() -> None:
    # The same card on two nodes is two cards; without a node it overlaps every node's entry.
    entries = [f"  - {{uuid: GPU-{n:05d}, node: w{k}}}\n" for n in range(5_000) for k in (1, 2)]
    entries += [f"  - uuid: GPU-{n:05d}\n" for n in range(5_000)]
    text = "version: v1\npools:\n- name: big\n  devices:\n" + "".join(entries)
    with pytest.raises(ConfigErrors) as refused:
        parse_native(text, "big.yaml")
    errors = refused.value.errors
    assert len(errors) == 5_000
    assert errors[0].path == "pools[0].devices[10000]"
    assert errors[0].message.startswith("names the same card as pools[0].devices[0] ")


@pytest.mark.timeout(10)
def test_merging_19000_dkp_patterns_is_linear() -> None:
    # 19,000 entries of 5 nodes each: as many as the node limit lets through.
    gpus = "".join(f"    - {{pattern: GPU-{n % 9_500:08d}, name: pool-a}}\n" for n in range(19_000))
    obj = ConfigMapObject(
        "nvidia-device-plugin-pool-a-config",
        data={"config.yaml": "version: v1\nresources:\n  gpus:\n" + gpus},
        source="configmap pool-a",
    )
    (pool,) = parse_dkp_plugin_config(obj, env={})
    assert len(pool.devices) == 9_500


def test_errors_of_one_object_are_capped(tmp_path: Path) -> None:
    source, path = good_source(tmp_path, "pools.yaml")
    write_atomically(path, hostile_document("many-device-entries", 0)[1])
    pools, errors = source.reload()
    assert names(pools) == ["good"]
    assert len(errors) == MAX_ERRORS_PER_OBJECT
    assert errors[-1].message.endswith("more errors not shown")


def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    source, path = good_source(tmp_path, "pools.yaml")
    write_atomically(path, (GOOD_YAML + "#" * (MAX_DOCUMENT_BYTES - len(GOOD_YAML) - 1) + "\n").encode())
    pools, errors = source.reload()
    assert (names(pools), errors) == (["good"], [])
    write_atomically(path, (GOOD_YAML + "#" * (MAX_DOCUMENT_BYTES - len(GOOD_YAML)) + "\n").encode())
    pools, errors = source.reload()
    error = assert_refused_keeping_good(pools, errors, path, "too large")
    assert error.message == (
        f"too large: at most {MAX_DOCUMENT_BYTES} bytes (1 MiB, a ConfigMap's own limit) are read; "
        f"this is {MAX_DOCUMENT_BYTES + 1} bytes"
    )


def test_a_configmap_directory_is_held_to_the_limit_as_a_whole(tmp_path: Path) -> None:
    configmap = tmp_path / "team-a"
    configmap.mkdir()
    (configmap / "pools.yaml").write_text(GOOD_YAML)
    source = DirectoryPoolSource(tmp_path, ignore)
    assert names(source.reload()[0]) == ["good"]
    for n in range(3):  # each key alone is within the limit, together they are not
        (configmap / f"notes-{n}.yaml").write_text("#" * (MAX_DOCUMENT_BYTES // 2))
    pools, errors = source.reload()
    assert_refused_keeping_good(pools, errors, configmap, "too large")


def test_an_api_object_over_the_limit_keeps_its_last_good_pools() -> None:
    aggregator = PoolAggregator(ignore)
    good = ConfigMapObject(
        "pools", "ns", {"pools.yaml": GOOD_YAML}, resource_version="1", source="configmap ns/pools"
    )
    assert names(aggregator.update("api", [good])[0]) == ["good"]
    padding = "#" * MAX_DOCUMENT_BYTES + "\n"
    big = ConfigMapObject(
        "pools", "ns", {"pools.yaml": GOOD_YAML + padding}, resource_version="2", source=good.source
    )
    pools, errors = aggregator.update("api", [big])
    assert names(pools) == ["good"]
    assert [(e.source, e.path) for e in errors] == [("configmap ns/pools", "data")]
    assert errors[0].message.startswith("too large: at most 1048576 bytes")


EMPTY_DOCUMENTS = {
    "empty": "",
    "comments": "# nothing here yet\n",
    "version-only": "version: v1\n",
    "no-pools": "version: v1\npools: []\n",
}


@pytest.mark.parametrize("text", EMPTY_DOCUMENTS.values(), ids=EMPTY_DOCUMENTS.keys())
def test_an_empty_document_means_no_pools_from_it_and_is_logged_as_a_warning(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    source, path = good_source(tmp_path, "pools.yaml")
    caplog.set_level(logging.WARNING, logger="hcs_deviceplugin.pools")
    write_atomically(path, text.encode())
    pools, errors = source.reload()
    assert (names(pools), errors) == ([], [])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        f"{path} defines no pools (empty document): it serves nothing, "
        "and pools it defined before are withdrawn" in warnings
    )
