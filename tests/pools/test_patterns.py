"""Pattern selectors (DKP per-pool format): NVIDIA's matching rules, pinned case by case.

Upstream turns a pattern into a regexp by quoting everything but ``*`` (which becomes ``.*``) and
calls ``MatchString`` without anchors; the table is what that gives, and the property checks our
regexp-free matcher against exactly that construction.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.model import Card, DeviceSelector, pattern_matches, selector_matches

UUID = "GPU-0a1b2c3d-1111-2222-3333-444455556666"


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        pytest.param(UUID, UUID, True, id="exact-uuid"),
        pytest.param("GPU-0a1b", UUID, True, id="prefix-is-a-substring"),
        pytest.param("3333-4444", UUID, True, id="middle-substring"),
        pytest.param("GPU-1", "GPU-12", True, id="unanchored-so-GPU-1-matches-GPU-12"),
        pytest.param("^$", UUID, False, id="placeholder-matches-nothing"),
        pytest.param("^$", "", False, id="placeholder-not-even-empty"),
        pytest.param(f"^{UUID}$", UUID, False, id="anchors-are-literal"),
        pytest.param("*", UUID, True, id="star-matches-everything"),
        pytest.param("*", "", True, id="star-matches-empty"),
        pytest.param("GPU-*-4444", UUID, True, id="star-in-the-middle"),
        pytest.param("6666*GPU", UUID, False, id="pieces-must-come-in-order"),
        pytest.param("GPU-.*", UUID, False, id="dot-is-literal"),
        pytest.param("gpu-0a1b", UUID, False, id="case-sensitive"),
        pytest.param("1111**2222", UUID, True, id="double-star"),
        pytest.param("aa*aa", "aaa", False, id="pieces-do-not-overlap"),
        pytest.param("aa*aa", "aaaa", True, id="pieces-adjacent"),
    ],
)
def test_pattern_matches(pattern: str, text: str, expected: bool) -> None:
    assert pattern_matches(pattern, text) is expected


def upstream(pattern: str, text: str) -> bool:
    """NVIDIA's ``wildCardToRegexp`` + unanchored ``regexp.MatchString``."""
    regexp = ".*".join(re.escape(piece) for piece in pattern.split("*"))
    return re.search(regexp, text) is not None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab*^$.-", max_size=8), st.text(alphabet="ab^$.-", max_size=10))
def test_pattern_matches_is_upstream_matching(pattern: str, text: str) -> None:
    assert pattern_matches(pattern, text) is upstream(pattern, text)


def card(card_id: str) -> Card:
    return Card(id=card_id, backend="nvidia", vendor="nvidia", model="H100", index=0)


def test_selector_with_pattern_matches_card_id() -> None:
    assert selector_matches(DeviceSelector(pattern="GPU-0a1b"), card(UUID), "w1")
    assert not selector_matches(DeviceSelector(pattern="^$"), card(UUID), "w1")
    assert selector_matches(DeviceSelector(pattern="*"), card("npu-chip-1"), "w1")


def test_selector_pattern_respects_node() -> None:
    selector = DeviceSelector(pattern="*", node="w2")
    assert not selector_matches(selector, card(UUID), "w1")
    assert selector_matches(selector, card(UUID), "w2")


def test_describe_names_the_pattern() -> None:
    assert DeviceSelector(pattern="^$").describe() == "pattern=^$"
