"""Documents short enough for libyaml to compose before their bounds are checked are held to the
same bounds, with the same first error at the same place, as the pure-Python loader that checks
while it composes: node count and depth beyond the limits win over anything found later (a
duplicate key, a bad value)."""

from __future__ import annotations

import pytest
import yaml

from hcs_deviceplugin.pools import document
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.limits import MAX_DEPTH, MAX_NODES

SOURCE = "configmap test"


def pure_python_error(text: str) -> str:
    try:
        document._run(document._StrictSafeLoader, text, every=False)
    except yaml.YAMLError as exc:
        return document._yaml_error(SOURCE, exc).message
    raise AssertionError("the pure-Python loader accepted it")


def fast_error(text: str) -> str:
    assert document._FastLoader is not None, "libyaml is part of the locked PyYAML wheels"
    assert len(text) <= document.COMPOSE_FIRST_CHARS and "&" not in text and "*" not in text
    with pytest.raises(ConfigErrors) as raised:
        document.load_document(text, SOURCE)
    (error,) = raised.value.errors
    return error.message


FLOW_KEYS = (MAX_NODES // 2) + 1  # each key and its null value are nodes: with the mapping, one over
KEYS = ",".join(["a"] * FLOW_KEYS)  # 2 characters per 2 nodes: short enough for the fast path
DEEPER = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)

DOCUMENTS = {
    # Every key the same: the node limit is the first error, not the duplicate key.
    "too many nodes, duplicate keys": "{" + KEYS + "}\n",
    "too many nodes after a duplicate": "{x: 1, x: 2, " + KEYS + "}\n",
    "too many nodes in a nested mapping": "pools:\n- {" + KEYS + "}\n",
    "too deep, then too many nodes": "a: " + DEEPER + "\nb: {" + KEYS + "}\n",
    "too many nodes, then too deep": "b: {" + KEYS + "}\na: " + DEEPER + "\n",
    "too deep after the depth limit itself": "a: "
    + "[" * MAX_DEPTH
    + "]" * MAX_DEPTH
    + "\nb: "
    + DEEPER
    + "\n",
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_the_fast_path_refuses_as_the_pure_python_loader_does(name: str) -> None:
    text = DOCUMENTS[name]
    expected = pure_python_error(text)
    assert expected.startswith("refused at line ")
    assert fast_error(text) == expected


def test_a_document_of_exactly_the_node_limit_gets_past_the_bounds() -> None:
    # A list, a mapping and 49,999 keys with their values: MAX_NODES nodes. The duplicate keys are
    # then the error, so the bounds let it through; one value more and the bounds refuse it.
    at_limit = "[{" + ",".join(["a"] * ((MAX_NODES - 2) // 2)) + "}]\n"
    assert "duplicate key" in fast_error(at_limit)
    assert fast_error(at_limit.replace("[", "[0,", 1)).startswith("refused at line ")


DEPTH = document.MAX_FLOW_DEPTH


@pytest.mark.parametrize(
    ("text", "too_deep"),
    [
        pytest.param("[" * DEPTH + "]" * DEPTH, False, id="at-the-limit"),
        pytest.param("[" * (DEPTH + 1), True, id="one-over-unclosed"),
        pytest.param("{" * (DEPTH // 2) + "[" * (DEPTH // 2 + 1), True, id="both-kinds-over"),
        pytest.param("[]" * (DEPTH * 10), False, id="many-but-shallow"),
        pytest.param("]" * DEPTH + "[" * DEPTH, False, id="unmatched-closers-do-not-go-below-zero"),
        pytest.param("é[" * (DEPTH + 1), True, id="brackets-between-non-ascii-characters"),
        pytest.param("\ud800[" * (DEPTH + 1), True, id="brackets-between-lone-surrogates"),
        pytest.param("'" + "[" * (DEPTH + 1) + "'", True, id="inside-a-quoted-string-counts-too"),
        pytest.param("[" * DEPTH + "]" + "[", False, id="closed-one-then-opened-one"),
        pytest.param("[" * DEPTH + "x" + "[", True, id="a-character-between-is-no-closer"),
    ],
)
def test_flow_depth_is_counted_over_the_brackets_alone(text: str, too_deep: bool) -> None:
    assert document._flow_too_deep(text) is too_deep
