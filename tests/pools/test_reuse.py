"""Reusing the entries of a source's previous parse (:mod:`hcs_deviceplugin.pools.reuse`): an unchanged
entry is the very pool of the previous parse, and every edit, even one Python's ``==`` cannot see, is
checked again, with the errors a first parse gives."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.model import Pool
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.native import LAST_PARSE, parse_native
from hcs_deviceplugin.pools.reuse import LastParse, entry_key

SOURCE = "configmap d8-gpu-control-plane/hcs-deviceplugin-pools"


def document(*entries: str, prefix: str | None = None) -> str:
    head = ["version: v1"] + ([f"resourcePrefix: {prefix}"] if prefix else []) + ["pools:"]
    return "\n".join(head + [f"  - {entry}" for entry in entries]) + "\n"


def errors_of(text: str, source: str = SOURCE) -> list[ConfigError]:
    with pytest.raises(ConfigErrors) as caught:
        parse_native(text, source)
    return caught.value.errors


def fresh_errors_of(text: str, source: str = SOURCE) -> list[ConfigError]:
    LAST_PARSE.forget()
    return errors_of(text, source)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        pytest.param(1, True, id="int-and-bool"),
        pytest.param(1, 1.0, id="int-and-float"),
        pytest.param(0, False, id="zero-and-false"),
        pytest.param(1, "1", id="int-and-string"),
        pytest.param(None, "null", id="null-and-string"),
        pytest.param(datetime.date(2024, 1, 1), "2024-01-01", id="date-and-string"),
        pytest.param({"a": 1, "b": 2}, {"b": 2, "a": 1}, id="key-order"),
        pytest.param([{"uuid": "x"}], [{"uuid": "x "}], id="nested-value"),
    ],
)
def test_entries_python_takes_for_equal_or_alike_have_different_keys(one: object, other: object) -> None:
    assert entry_key({"slicesPerUnit": one}) != entry_key({"slicesPerUnit": other})


def test_equal_entries_have_one_key() -> None:
    assert entry_key({"name": "a", "devices": [{"uuid": "x"}]}) == entry_key(
        {"name": "a", "devices": [{"uuid": "x"}]}
    )


def test_previous_is_the_last_parse_of_the_source_in_the_same_context() -> None:
    last: LastParse[str] = LastParse()
    assert last.previous("a", 1) == {}
    last.remember("a", 1, {"k": "first"})
    last.remember("a", 1, {"k": "second"})
    assert last.previous("a", 1) == {"k": "second"}
    assert last.previous("a", 2) == {}, "another context is another parse"
    assert last.previous("b", 1) == {}, "another source is another parse"


def test_the_sources_parsed_last_are_kept() -> None:
    last: LastParse[str] = LastParse(max_sources=2)
    last.remember("a", 0, {"k": "a"})
    last.remember("b", 0, {"k": "b"})
    last.remember("a", 0, {"k": "a again"})  # a is now the newer of the two
    last.remember("c", 0, {"k": "c"})
    assert last.previous("b", 0) == {}
    assert last.previous("a", 0) == {"k": "a again"}
    assert last.previous("c", 0) == {"k": "c"}


def test_entries_over_the_character_bound_are_not_kept_nor_the_ones_before() -> None:
    last: LastParse[str] = LastParse(max_chars=10)
    last.remember("a", 0, {"12345": "small"})
    last.remember("b", 0, {"123": "b"})
    last.remember("a", 0, {"12345678901": "big"})
    assert last.previous("a", 0) == {}
    assert last.previous("b", 0) == {"123": "b"}, "another source does not make room for it"


def test_the_sources_parsed_last_are_kept_within_the_character_bound() -> None:
    last: LastParse[str] = LastParse(max_chars=10)
    last.remember("a", 0, {"1234": "a"})
    last.remember("b", 0, {"1234": "b"})
    last.remember("a", 0, {"123": "a again"})  # a's count is replaced, not added to: 7 in all
    last.remember("c", 0, {"12": "c"})  # 9 in all
    assert [last.previous(s, 0) for s in "abc"] == [{"123": "a again"}, {"1234": "b"}, {"12": "c"}]
    last.remember("d", 0, {"12": "d"})  # 11: b, the oldest, goes
    assert [last.previous(s, 0) for s in "abcd"] == [{"123": "a again"}, {}, {"12": "c"}, {"12": "d"}]


def test_forget_drops_everything() -> None:
    last: LastParse[str] = LastParse(max_chars=10)
    last.remember("a", 0, {"123456789": "a"})
    last.forget()
    assert last.previous("a", 0) == {}
    last.remember("b", 0, {"123456789": "b"})
    assert last.previous("b", 0) == {"123456789": "b"}, "forgotten characters no longer count"


def test_an_unchanged_entry_is_the_pool_of_the_previous_parse() -> None:
    before = parse_native(document("{name: a}", "{name: b, slicesPerUnit: 2}", "{name: c}"), SOURCE)
    after = parse_native(document("{name: a}", "{name: b, slicesPerUnit: 3}", "{name: c}"), SOURCE)
    assert after[0] is before[0]
    assert after[2] is before[2]
    assert after[1] is not before[1]
    assert (after[1].name, after[1].slices_per_unit) == ("b", 3)


def test_a_moved_entry_is_still_reused_and_keeps_no_trace_of_its_old_place() -> None:
    before = parse_native(document("{name: a}", "{name: b}"), SOURCE)
    after = parse_native(document("{name: b}", "{name: a}"), SOURCE)
    assert [p.name for p in after] == ["b", "a"]
    assert after[0] is before[1]


@pytest.mark.parametrize(
    ("edited", "path", "fragment"),
    [
        pytest.param("{name: b, slicesPerUnit: true}", "pools[1].slicesPerUnit", "boolean true", id="bool"),
        pytest.param("{name: b, slicesPerUnit: 1.0}", "pools[1].slicesPerUnit", "number 1.0", id="float"),
        pytest.param("{name: b, slicesPerUnit: '1'}", "pools[1].slicesPerUnit", "string '1'", id="string"),
        pytest.param("{name: b, slicesPerUnit: 0}", "pools[1].slicesPerUnit", "1..64", id="range"),
        pytest.param("{name: B}", "pools[1].name", "DNS-1123", id="name"),
    ],
)
def test_an_edited_entry_is_checked_again(edited: str, path: str, fragment: str) -> None:
    parse_native(document("{name: a}", "{name: b, slicesPerUnit: 1}"), SOURCE)
    errors = errors_of(document("{name: a}", edited))
    assert [e.path for e in errors] == [path]
    assert fragment in errors[0].message
    assert errors == fresh_errors_of(document("{name: a}", edited))


def test_a_broken_entry_is_reported_on_every_parse() -> None:
    text = document("{name: a}", "{name: b, slicesPerUnit: 99}")
    first = errors_of(text)
    assert [e.path for e in first] == ["pools[1].slicesPerUnit"]
    assert errors_of(text) == first


def test_checks_across_entries_are_made_on_reused_entries() -> None:
    parse_native(document("{name: a}", "{name: b}"), SOURCE)
    errors = errors_of(document("{name: a}", "{name: b}", "{name: a}"))
    assert [(e.path, "duplicate pool name 'a'" in e.message) for e in errors] == [("pools[2].name", True)]


def test_a_new_resource_prefix_renames_every_pool() -> None:
    parse_native(document("{name: a}"), SOURCE)
    [pool] = parse_native(document("{name: a}", prefix="gpu.example.com"), SOURCE)
    assert pool.resource_name == "gpu.example.com/a"


def test_another_source_gets_pools_of_its_own() -> None:
    parse_native(document("{name: a}"), SOURCE)
    [pool] = parse_native(document("{name: a}"), "another.yaml")
    assert pool.source == "another.yaml"


ENTRIES = [
    "{name: a}",
    "{name: a, slicesPerUnit: 2}",
    "{name: a, slicesPerUnit: 2.0}",
    "{name: a, slicesPerUnit: true}",
    "{name: b}",
    "{name: b, scope: cluster}",
    "{name: b, unit: Partition}",
    "{name: b, unit: Partition, profile: 1g.10gb}",
    "{name: c, devices: [{uuid: x}]}",
    "{name: c, devices: [{uuid: x}, {uuid: x}]}",
    "{name: c, devices: [{pciAddress: '0000:17:00.0'}]}",
    "{name: c, resourceName: nvidia.com/gpu}",
    "{name: d, resourceName: nvidia.com/gpu}",
    "{name: d, replicaPlacement: pack}",
    "{name: d, deviceDelivery: env}",
    "{name: d, typo: 1}",
    "{name: '1'}",
    "{name: 1}",
]
documents = st.tuples(
    st.lists(st.sampled_from(ENTRIES), max_size=5), st.sampled_from([None, "gpu.example.com", "bad_prefix"])
)


def outcome(text: str) -> list[Pool] | list[ConfigError]:
    try:
        return parse_native(text, SOURCE)
    except ConfigErrors as exc:
        return exc.errors


@settings(max_examples=200, deadline=None)
@given(st.lists(documents, min_size=1, max_size=6))
def test_a_parse_after_any_other_is_the_parse_of_a_fresh_start(
    history: list[tuple[list[str], str | None]],
) -> None:
    for entries, prefix in history:
        text = document(*entries, prefix=prefix)
        after_the_last = outcome(text)
        LAST_PARSE.forget()
        assert after_the_last == outcome(text)
