"""Text to plain data (mappings, lists, scalars), with syntax errors turned into :class:`ConfigError`.

Kept apart from the formats so that every format (native, and later the DKP ones) reads its text the
same way and reports syntax errors the same way: path ``<document>``, line and column in the message.
Two things the stock loaders do silently are errors here, because both hide config from the user: a
key given twice in one mapping (the last one would win and drop the first), and, for YAML, a stream
of several documents.

YAML 1.1 also reads ``0000:17:00.0`` (an unquoted PCI address) as the base-60 number 1020.0; YAML 1.2
dropped base-60 numbers, and so does this loader, so such a value stays the string the user wrote.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import yaml

from hcs_deviceplugin.pools.errors import DOCUMENT_PATH, ConfigError, ConfigErrors

Syntax = Literal["yaml", "json"]


class _DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping names one key twice; marked with the position of the second occurrence."""


class _StrictSafeLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses duplicate mapping keys instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: the stock constructor reports it
                continue
            if duplicate:
                raise _DuplicateKeyError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"

# PyYAML's SafeLoader resolvers for int and float, minus their base-60 (``1:30``) alternatives.
_StrictSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictSafeLoader.add_implicit_resolver(
    _INT_TAG,
    re.compile(
        r"""^(?:[-+]?0b[0-1_]+
        |[-+]?0[0-7_]+
        |[-+]?(?:0|[1-9][0-9_]*)
        |[-+]?0x[0-9a-fA-F_]+)$""",
        re.X,
    ),
    list("-+0123456789"),
)
_StrictSafeLoader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_StrictSafeLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _StrictSafeLoader.construct_mapping,
)


def _yaml_error(source: str, exc: yaml.YAMLError) -> ConfigError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        context = ""
        if exc.context and exc.problem and exc.context_mark is not None:
            context = f" ({exc.context} at line {exc.context_mark.line + 1})"
        return ConfigError(source, DOCUMENT_PATH, f"invalid YAML at {where}{problem}{context}")
    return ConfigError(source, DOCUMENT_PATH, f"invalid YAML: {exc}")


class _DuplicateJSONKeyError(ValueError):
    pass


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateJSONKeyError(f"found duplicate key {key!r}")
        out[key] = value
    return out


def load_document(text: str, source: str, syntax: Syntax = "yaml") -> object:
    """Parse ``text`` as one YAML (default) or JSON document; ``None`` for an empty YAML document.

    JSON files get the JSON parser because PyYAML's YAML 1.1 rejects some valid JSON (tabs as
    indentation). Raises :class:`ConfigErrors` with one ``<document>`` error on a syntax problem.
    """
    try:
        return _load(text, source, syntax)
    except RecursionError as exc:
        raise ConfigErrors([_too_deep(source)]) from exc


def load_documents(text: str, source: str) -> list[object]:
    """Every document of a YAML stream (``---`` separated), with the same strictness as
    :func:`load_document`; for manifests (``kubectl get -o yaml`` output, several ConfigMaps in one
    file), where several documents are the norm rather than a mistake.
    """
    if _flow_too_deep(text):
        raise ConfigErrors([_too_deep(source)])
    try:
        return list(yaml.load_all(text, Loader=_StrictSafeLoader))  # a SafeLoader subclass: safe
    except yaml.YAMLError as exc:
        raise ConfigErrors([_yaml_error(source, exc)]) from exc
    except RecursionError as exc:
        raise ConfigErrors([_too_deep(source)]) from exc


MAX_FLOW_DEPTH = 100
"""Deepest ``[``/``{`` nesting read; real pool documents nest a handful of levels."""


def _too_deep(source: str) -> ConfigError:
    # Both loaders build nested collections recursively; thousands of levels exhaust the stack.
    return ConfigError(source, DOCUMENT_PATH, "nested too deeply to read")


def _flow_too_deep(text: str) -> bool:
    """Whether brackets nest deeper than :data:`MAX_FLOW_DEPTH`, counted without parsing.

    PyYAML's scanner re-checks every open flow level on every token, so ``[`` repeated a few thousand
    times costs seconds before the stack overflows: refuse it up front. Brackets inside quoted strings
    count too, so a (pathological) string of a hundred unbalanced brackets is refused as well.
    """
    if text.count("[") + text.count("{") <= MAX_FLOW_DEPTH:
        return False
    depth = 0
    for char in text:
        if char in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                return True
        elif char in "]}" and depth:
            depth -= 1
    return False


def _load(text: str, source: str, syntax: Syntax) -> object:
    if syntax == "json":
        try:
            return json.loads(text, object_pairs_hook=_no_duplicate_pairs)
        except json.JSONDecodeError as exc:
            raise ConfigErrors(
                [
                    ConfigError(
                        source,
                        DOCUMENT_PATH,
                        f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                    )
                ]
            ) from exc
        except _DuplicateJSONKeyError as exc:
            raise ConfigErrors([ConfigError(source, DOCUMENT_PATH, f"invalid JSON: {exc}")]) from exc
    if _flow_too_deep(text):
        raise ConfigErrors([_too_deep(source)])
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # a SafeLoader subclass: safe
    except yaml.YAMLError as exc:
        raise ConfigErrors([_yaml_error(source, exc)]) from exc
