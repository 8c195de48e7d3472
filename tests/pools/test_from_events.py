"""Building a simple document from libyaml's events (:mod:`hcs_deviceplugin.pools.from_events`): the
same values as composing it, and every document that is not simple left to the full reading."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.pools import document
from hcs_deviceplugin.pools.from_events import MAX_SHARED_CHARS, NOT_SIMPLE, document_from_events
from hcs_deviceplugin.pools.limits import MAX_DEPTH, MAX_NODES

pytestmark = pytest.mark.skipif(document._FastLoader is None, reason="PyYAML without libyaml")


def from_events(text: str) -> object:
    assert document._FastLoader is not None
    loader = document._FastLoader(text)
    try:
        return document_from_events(loader, {})
    finally:
        loader.dispose()


def composed(text: str) -> object:
    return document._compose_first(document._FastLoader, text)


def native_document(pools: int) -> str:
    lines = ["version: v1", "pools:"]
    for n in range(pools):
        lines += [
            f"  - name: pool-{n}",
            f"    slicesPerUnit: {1 + n % 4}",
            f"    devices: [{{uuid: GPU-{n}}}]",
        ]
    return "\n".join(lines) + "\n"


SIMPLE = [
    pytest.param("", id="empty-stream"),
    pytest.param("# only a comment\n", id="comment-only"),
    pytest.param("---\n...\n", id="empty-document"),
    pytest.param("just text\n", id="scalar-root"),
    pytest.param("{}", id="empty-mapping"),
    pytest.param("[]", id="empty-list"),
    pytest.param(native_document(50), id="native-pools"),
    pytest.param(
        "a: 1\nb: -0x1f\nc: 0o17\nd: 017\ne: 1_000\nf: 1.5\ng: .inf\nh: true\ni: No\nj: ~\nk: null\nl:\n",
        id="constructed-scalars",
    ),
    pytest.param("a: '1'\nb: \"true\"\nc: |\n  block\nd: >\n  folded\n", id="quoted-and-block-strings"),
    pytest.param("pci: 0000:17:00.0\nsexagesimal: 1:30\n", id="no-base-60"),
    pytest.param("a: [1, 1, true, true, x, x]\nb: {x: 1, y: 1}\n", id="repeated-values"),
    pytest.param("a: ['1', 1, 'true', true, '', ]\nb: {'~': ~}\n", id="quoted-then-plain"),
    pytest.param("1: a\nnull: b\n1.5: c\n", id="scalar-keys-of-other-types"),
    pytest.param("a:\n  b:\n    - c: [d, {e: f}]\n", id="nested"),
    pytest.param("[" * MAX_DEPTH + "]" * MAX_DEPTH, id="as-deep-as-allowed"),
    pytest.param("[" + ",".join(["0"] * (MAX_NODES - 1)) + "]", id="as-many-values-as-allowed"),
]


@pytest.mark.parametrize("text", SIMPLE)
def test_a_simple_document_is_built_as_composing_builds_it(text: str) -> None:
    value = from_events(text)
    assert value is not NOT_SIMPLE
    assert value == composed(text)
    assert repr(value) == repr(composed(text)), "the same types, not only equal values"


NOT_SIMPLE_DOCUMENTS = [
    pytest.param("a: !!str 5\n", id="scalar-tag"),
    pytest.param("a: !custom x\n", id="local-tag"),
    pytest.param("a: !!set {x, y}\n", id="collection-tag"),
    pytest.param("a: &x 1\n", id="anchor"),
    pytest.param("a: &x 1\nb: *x\n", id="alias"),
    pytest.param("a: 1\nb: 2\na: 3\n", id="duplicate-key"),
    pytest.param("1: a\ntrue: b\n", id="keys-python-takes-for-one"),
    pytest.param("? [a]\n: b\n", id="list-as-key"),
    pytest.param("{? {a: b}: c}\n", id="mapping-as-key"),
    pytest.param("a: 1\n<<: {b: 2}\n", id="merge-key"),
    pytest.param("a: 2024-01-01\n", id="timestamp"),
    pytest.param("a: 2024-13-45\n", id="timestamp-the-constructor-refuses"),
    pytest.param("a: 0b_\n", id="integer-the-constructor-refuses"),
    pytest.param("a: " + "9" * (document.MAX_INT_CHARS + 1) + "\n", id="integer-too-long"),
    pytest.param("a: =\n", id="value-tag"),
    pytest.param("a: 1\n---\nb: 2\n", id="two-documents"),
    pytest.param("a: [1\n", id="syntax-error"),
    pytest.param("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), id="too-deep"),
    pytest.param("[" + ",".join(["0"] * MAX_NODES) + "]", id="too-many-values"),
    pytest.param("[" + ",".join(["{}"] * MAX_NODES) + "]", id="too-many-collections"),
]


@pytest.mark.parametrize("text", NOT_SIMPLE_DOCUMENTS)
def test_a_document_that_is_not_simple_is_left_to_the_full_reading(text: str) -> None:
    assert from_events(text) is NOT_SIMPLE


def outcome(read: Any, text: str) -> tuple[str, object]:
    try:
        return "value", repr(read(text))
    except (yaml.YAMLError, ValueError) as exc:
        return "error", (type(exc), str(exc))


PIECES = [
    "a",
    "1",
    "true",
    "~",
    ":",
    ": ",
    "- ",
    "\n",
    "  ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "'",
    '"',
    "!!str ",
    "?",
    "#",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_any_text_reads_as_the_composing_reader_reads_it(pieces: list[str]) -> None:
    """Mostly broken or odd YAML: each is built the same, or left to the full reading, which then
    gives what it always gave."""
    text = "".join(pieces)
    assert outcome(document._read_short, text) == outcome(
        lambda t: document._compose_first(document._FastLoader, t), text
    )


def test_a_text_quoted_in_one_document_keeps_its_plain_value_in_the_next() -> None:
    """Plain scalars' values are shared across documents; a quoted one is a string and must not be."""
    assert document.load_document("a: '1'\nb: 'true'\nc: '~'\n", "first.yaml") == {
        "a": "1",
        "b": "true",
        "c": "~",
    }
    assert document.load_document("a: 1\nb: true\nc: ~\n", "second.yaml") == {"a": 1, "b": True, "c": None}


def test_the_shared_plain_values_stay_bounded_between_documents() -> None:
    names = "\n".join(f"k{i}: v{i}" for i in range(document.MAX_PLAIN_SCALARS))
    document.load_document(names, "many.yaml")
    assert len(document._PLAIN_SCALARS) <= document.MAX_PLAIN_SCALARS
    long = "x" * (MAX_SHARED_CHARS + 1)
    document.load_document(f"{long}: {long[:-1]}\n", "long.yaml")
    assert long not in document._PLAIN_SCALARS
    assert long[:-1] in document._PLAIN_SCALARS
