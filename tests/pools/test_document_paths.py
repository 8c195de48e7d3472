"""The compose-first path of the YAML loader (alias-free documents of up to COMPOSE_FIRST_CHARS)
reads every document as the pure-Python strict loader does: the same values, and the same error at
the same place for a duplicate key, a merge key, too many values or too deep a nesting."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.pools import document
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.limits import MAX_DEPTH, MAX_NODES

SOURCE = "test.yaml"


def composed_first(text: str) -> bool:
    return len(text) <= document.COMPOSE_FIRST_CHARS and "&" not in text and "*" not in text


def reference(text: str) -> object:
    """The pure-Python strict loader, bounded as it composes: what the fast path must agree with."""
    try:
        return document._run(document._StrictSafeLoader, text, every=False)[0]
    except yaml.YAMLError as exc:
        raise ConfigErrors([document._yaml_error(SOURCE, exc)]) from exc


def outcome(load: Any, text: str) -> tuple[str, object]:
    try:
        return "value", load(text)
    except ConfigErrors as exc:
        return "errors", [str(e) for e in exc.errors]


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_characters="&*"), max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(codec="utf-8", exclude_characters="&*"), max_size=8), inner, max_size=4
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans())
def test_alias_free_documents_read_the_same_as_the_pure_python_loader(value: object, flow: bool) -> None:
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    if not composed_first(text):
        return
    got = outcome(lambda t: document.load_document(t, SOURCE), text)
    want = outcome(reference, text)
    assert got == want
    if got[0] == "value" and isinstance(value, float) and not math.isnan(value):
        assert got[1] == value


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 2\na: 3\n",  # duplicate key, named at its second place
        "pools:\n  - name: x\n    <<: {name: y}\n",  # merge key without an alias
        "x" + "".join(f"\n{'  ' * d}k{d}:" for d in range(MAX_DEPTH + 3)) + " v\n",  # too deep (block)
        "{" + ",".join(["k"] * (MAX_NODES // 2 + 10)) + "}",  # too many values (before the duplicates)
        "[1, [2, {a: [3, 4]}], {b: c, ? [x]: y}]\n",  # an unhashable key: the constructor's words
        "a: 0x1F\nb: 0b101\nc: 1_000\nd: 1:30\ne: 2001-12-14\nf: !!binary aGk=\ng: ~\n",  # tags
        "a: " + "9" * (document.MAX_INT_CHARS + 1) + "\n",  # an integer too long
        "a: 0b_\nb: 1\n",  # an integer int() refuses
        "a: [._]\n",  # a number float() refuses
        "a: {b: 2024-13-45}\n",  # a date datetime refuses
    ],
)
def test_the_compose_first_path_gives_the_same_value_or_error(text: str) -> None:
    assert composed_first(text)
    assert outcome(lambda t: document.load_document(t, SOURCE), text) == outcome(reference, text)
