"""LazyPattern: the same answers as ``re``, compiled once and only when first used."""

from __future__ import annotations

import re

import pytest

from hcs_deviceplugin.lazyre import LazyPattern


@pytest.mark.parametrize(
    ("source", "text"),
    [
        pytest.param(r"[a-z]+", "abc", id="whole-match"),
        pytest.param(r"[a-z]+", "abc1", id="prefix-only"),
        pytest.param(r"[a-z]+", "1abc", id="no-match"),
        pytest.param(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "--a.b--", id="edges"),
        pytest.param(r"(?P<n>[0-9]+)(?P<s>Mi)?", "12Mi", id="groups"),
        pytest.param(r"", "", id="empty"),
    ],
)
def test_answers_as_re_does(source: str, text: str) -> None:
    lazy, eager = LazyPattern(source), re.compile(source)
    assert _groups(lazy.match(text)) == _groups(eager.match(text))
    assert _groups(lazy.fullmatch(text)) == _groups(eager.fullmatch(text))
    assert lazy.sub("-", text) == eager.sub("-", text)


def _groups(match: re.Match[str] | None) -> tuple[str, tuple[str | None, ...]] | None:
    return None if match is None else (match.group(0), match.groups())


def test_compiles_on_first_use_and_only_once() -> None:
    pattern = LazyPattern(r"x+", re.IGNORECASE)
    assert not pattern.is_compiled
    assert pattern.fullmatch("XX") is not None
    assert pattern.is_compiled
    assert pattern.compiled is pattern.compiled
    assert pattern.compiled.flags & re.IGNORECASE


def test_a_bad_pattern_fails_where_it_is_used() -> None:
    pattern = LazyPattern(r"(")
    with pytest.raises(re.error):
        pattern.match("(")
