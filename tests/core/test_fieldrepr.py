"""field_repr: the shared ``__repr__`` writes exactly what ``dataclass``'s generated one would."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.fieldrepr import field_repr

FIELDS: list[Any] = [
    ("name", str),
    ("count", int),
    ("hidden", str, dataclasses.field(default="", repr=False)),
    ("items", tuple, dataclasses.field(default=())),
    ("extra", object, dataclasses.field(default=None)),
]


def twins(frozen: bool) -> tuple[type, type]:
    """The same class twice, named alike: with the generated ``__repr__``, and with the shared one."""
    namespace = {"LIMIT": 3, "__annotations__": {"LIMIT": ClassVar[int]}}
    eager = dataclasses.make_dataclass("Sample", FIELDS, namespace=dict(namespace), frozen=frozen)
    lazy = dataclasses.make_dataclass("Sample", FIELDS, namespace=dict(namespace), frozen=frozen, repr=False)
    return eager, field_repr(lazy)


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=3),
    max_leaves=6,
)


@given(
    name=st.text(max_size=12),
    count=st.integers(),
    hidden=st.text(max_size=4),
    items=st.tuples(values, values),
    extra=values,
    frozen=st.booleans(),
)
def test_the_same_text_as_the_generated_repr(
    name: str, count: int, hidden: str, items: tuple[Any, ...], extra: Any, frozen: bool
) -> None:
    eager, lazy = twins(frozen)
    assert repr(lazy(name, count, hidden, items, extra)) == repr(eager(name, count, hidden, items, extra))


def test_a_value_that_contains_itself_is_written_as_dots() -> None:
    looped = [cls("loop", 1, extra=[]) for cls in twins(frozen=False)]
    for sample in looped:
        sample.extra.append(sample)
    assert repr(looped[1]) == repr(looped[0]) == "Sample(name='loop', count=1, items=(), extra=[...])"


class Plain:
    pass


@dataclasses.dataclass
class Generated:
    value: int


@dataclasses.dataclass(repr=False)
class Written:
    value: int

    def __repr__(self) -> str:
        return "written"


@pytest.mark.parametrize("cls", [Plain, Generated, Written], ids=["not-a-dataclass", "repr-true", "own-repr"])
def test_refuses_what_would_compile_a_repr_for_nothing_or_lose_one(cls: type) -> None:
    with pytest.raises(TypeError, match="field_repr needs @dataclass"):
        field_repr(cls)
