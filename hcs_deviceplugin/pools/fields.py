"""Checking loaded YAML field by field, shared by every format.

Each format walks plain data (mappings, lists, scalars) and must report every problem with the path of
the field, in the same words, so a user reading errors from a native document and from a DKP config
sees one vocabulary. The helpers add to a :class:`Report` instead of raising, so a parser goes on and
finds the next problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.pools.errors import ConfigError
from hcs_deviceplugin.pools.limits import MAX_SHOWN_CHARS, shorten

MISSING: object = object()
"""Returned by :func:`optional` for an absent key (or one given as ``null``)."""


def describe_value(value: object) -> str:
    """A value as error messages show it: its YAML type, then the value (so ``"4"`` reads as a string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {shorten(str(value))}"
    if isinstance(value, float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {shorten(repr(value))}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def child(path: str, key: str) -> str:
    """``pools[1]`` + ``unit`` → ``pools[1].unit``; the root's children are bare keys."""
    return f"{path}.{key}" if path else key


def item(path: str, index: int) -> str:
    return f"{path}[{index}]"


@field_repr
@dataclass(eq=False, repr=False)  # never compared: no __eq__ to compile at start
class Report:
    """Errors of one document, in the order found."""

    source: str
    errors: list[ConfigError] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.errors.append(ConfigError(self.source, path, message))

    def mark(self) -> int:
        return len(self.errors)

    def clean_since(self, mark: int) -> bool:
        return len(self.errors) == mark


def check_keys(mapping: Mapping[object, object], allowed: Sequence[str], path: str, report: Report) -> None:
    """Report every key not in ``allowed``, with a "did you mean" hint for near misses and case slips."""
    for key in mapping:
        if not isinstance(key, str):
            report.add(child(path, shorten(str(key))), f"keys must be strings, got {describe_value(key)}")
            continue
        if key in allowed:
            continue
        if len(key) > MAX_SHOWN_CHARS:  # no near miss, and not worth quoting whole
            report.add(child(path, shorten(key)), f"unknown key; allowed: {', '.join(allowed)}")
            continue
        import difflib  # here: only a document with an unknown key needs a near miss

        guess = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        if not guess:
            guess = [k for k in allowed if k.lower() == key.lower()]
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        report.add(child(path, key), f"unknown key{hint}; allowed: {', '.join(allowed)}")


def optional(mapping: Mapping[object, object], key: str) -> object:
    """The value at ``key``, or :data:`MISSING` when absent or ``null`` (templating renders empty so)."""
    value = mapping.get(key, MISSING)
    return MISSING if value is None else value


def string(value: object, path: str, report: Report) -> str | None:
    """A non-empty string, or ``None`` after reporting why not."""
    if not isinstance(value, str):
        hint = "; quote it so that YAML reads it as a string" if isinstance(value, int | float) else ""
        report.add(path, f"must be a string, got {describe_value(value)}{hint}")
        return None
    if not value:
        report.add(path, "must not be empty")
        return None
    return value


def integer(value: object, path: str, low: int, high: int | None, report: Report) -> int | None:
    """An integer within ``low..high`` (``high`` None: unbounded), or ``None`` after reporting why not."""
    # bool is an int subclass in Python; ``slicesPerUnit: true`` must not read as 1.
    if isinstance(value, bool) or not isinstance(value, int):
        report.add(path, f"must be an integer, got {describe_value(value)}")
        return None
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f">= {low}"
        report.add(path, f"must be {bounds}, got {value}")
        return None
    return value


def boolean(value: object, path: str, report: Report) -> bool | None:
    """A YAML boolean (``true``/``false``, not the string ``"true"``), or ``None`` after reporting."""
    if not isinstance(value, bool):
        report.add(path, f"must be true or false, got {describe_value(value)}")
        return None
    return value


def one_of(value: object, choices: Sequence[str], path: str, report: Report) -> str | None:
    """A string that is exactly one of ``choices`` (case-sensitive), or ``None`` after reporting."""
    if isinstance(value, str) and value in choices:
        return value
    report.add(path, f"must be one of {', '.join(choices)}, got {describe_value(value)}")
    return None


def mapping(
    value: object, path: str, report: Report, what: str = "a mapping"
) -> Mapping[object, object] | None:
    """``value`` if it is a mapping, else ``None`` after reporting."""
    if isinstance(value, Mapping):
        return value
    report.add(path, f"must be {what}, got {describe_value(value)}")
    return None


def sequence(value: object, path: str, report: Report) -> list[object] | None:
    """``value`` if it is a list, else ``None`` after reporting."""
    if isinstance(value, list):
        return value
    report.add(path, f"must be a list, got {describe_value(value)}")
    return None
