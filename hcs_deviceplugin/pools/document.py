"""Text to plain data (mappings, lists, scalars), with syntax errors turned into :class:`ConfigError`.

Kept apart from the formats so that every format (native, and later the DKP ones) reads its text the
same way and reports syntax errors the same way: path ``<document>``, line and column in the message.
Two things the stock loaders do silently are errors here, because both hide config from the user: a
key given twice in one mapping (the last one would win and drop the first), and, for YAML, a stream
of several documents.

YAML 1.1 also reads ``0000:17:00.0`` (an unquoted PCI address) as the base-60 number 1020.0; YAML 1.2
dropped base-60 numbers, and so does this loader, so such a value stays the string the user wrote.

Every document is held to :mod:`.limits` while it is read, so a small hostile text cannot cost
memory or CPU out of proportion to its size:

* **Size** over 1 MiB is refused before anything is parsed.
* **Anchors, aliases and merge keys** (``&a``, ``*a``, ``<<``) are refused with their line: aliases
  are how a few hundred bytes expand to gigabytes (merge keys copy what they merge), and a pool
  document has no use for them.
* **Depth and node count** are bounded while the document is composed, before any value is built.

With libyaml present (PyYAML's wheels carry it), the document is first scanned as a stream of C
events for those bounds and then built by libyaml's composer: five times faster than pure Python on
a megabyte. A document of up to :data:`COMPOSE_FIRST_CHARS` with no ``&`` or ``*`` anywhere (so no
anchor or alias) skips the event scan: libyaml composes it at once, the bounds are checked on the
composed nodes (counted per collection; a document beyond them is walked again in document order for
the same error at the same place), and plain strings, lists and
mappings are built in one pass rather than through PyYAML's generic constructor (about 40 % less
CPU for a 1,000-pool document). A document libyaml finds invalid is read again by the pure-Python
loader (which checks the same bounds as it composes), so syntax errors are worded as they always
were, unless it is longer than :data:`PYTHON_WORDING_CHARS`; then libyaml's words are kept, since
reading it again would cost seconds.
"""

from __future__ import annotations

import gc
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from hcs_deviceplugin.lazyre import LazyPattern
from hcs_deviceplugin.pools.errors import DOCUMENT_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.limits import MAX_DEPTH, MAX_NODES, oversize, too_big_message

Syntax = Literal["yaml", "json"]


class _DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping names one key twice; marked with the position of the second occurrence."""


class _LimitError(yaml.MarkedYAMLError):
    """The document goes beyond a bound of :mod:`.limits`; marked where it does."""

    def __init__(self, problem: str, mark: object) -> None:
        super().__init__(None, None, problem, mark)  # type: ignore[arg-type]  # libyaml's Mark too


_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
MAX_INT_CHARS = 64
"""Longest integer literal read; longer ones are errors (no pool field needs more than a few digits,
and Python refuses to convert one of 4,300 digits to text for the error message)."""

ANCHOR_PROBLEM = "anchors, aliases and merge keys (&name, *name, <<) are not allowed in pool documents"


def _alias_problem(kind: str, name: str) -> str:
    return f"{kind} {name}: {ANCHOR_PROBLEM}"


def _depth_problem() -> str:
    return f"nested too deeply to read (more than {MAX_DEPTH} levels, the limit)"


def _nodes_problem() -> str:
    return f"more than {MAX_NODES} values (the limit)"


class _StrictConstructor(SafeConstructor):
    """``SafeConstructor`` that refuses duplicate keys, merge keys and absurdly long integers."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                raise _LimitError(_alias_problem("merge key", "<<"), key_node.start_mark)
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
                    f"found duplicate key {_shown(key)}",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        if len(node.value) > MAX_INT_CHARS:
            raise ConstructorError(
                None, None, f"integer of {len(node.value)} characters is too long", node.start_mark
            )
        return super().construct_yaml_int(node)


def _shown(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 120 else f"{text[:120]}... ({len(text)} characters)"


class _StrictResolver(Resolver):
    """PyYAML's resolvers for int and float, minus their base-60 (``1:30``) alternatives.

    ``resolve`` is PyYAML's, without its generic lookup (which builds a list of candidates for every
    scalar: a fifth of a 1,000-pool document's load): a quoted scalar, or a plain one whose first
    character no implicit resolver starts with, is a string at once; a collection gets its default
    tag. An empty scalar, and any loader with path or wildcard resolvers, goes to PyYAML's own.
    """

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        resolvers = self.yaml_implicit_resolvers
        if not self.yaml_path_resolvers and None not in resolvers:
            if kind is ScalarNode:
                if not implicit[0]:
                    return self.DEFAULT_SCALAR_TAG
                if value:
                    for tag, regexp in resolvers.get(value[0], ()):
                        if regexp.match(value):
                            return tag
                    return self.DEFAULT_SCALAR_TAG
            elif kind is MappingNode:
                return self.DEFAULT_MAPPING_TAG
            elif kind is SequenceNode:
                return self.DEFAULT_SEQUENCE_TAG
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


_StrictResolver.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}
_StrictResolver.add_implicit_resolver(
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
_StrictResolver.add_implicit_resolver(
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
_StrictConstructor.add_constructor(  # type: ignore[type-var]  # the stubs want a full Loader here
    Resolver.DEFAULT_MAPPING_TAG, _StrictConstructor.construct_mapping
)
_StrictConstructor.add_constructor(_INT_TAG, _StrictConstructor.construct_yaml_int)  # type: ignore[type-var]


class _BoundedComposer(Composer):
    """``Composer`` that refuses anchors and aliases and bounds depth and node count as it goes."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]  # the Parser's, in the loader
        if isinstance(event, yaml.AliasEvent):
            raise _LimitError(_alias_problem("alias", f"*{event.anchor}"), event.start_mark)
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            raise _LimitError(_alias_problem("anchor", f"&{event.anchor}"), event.start_mark)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _LimitError(_nodes_problem(), event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(_depth_problem(), event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _StrictSafeLoader(Reader, Scanner, Parser, _BoundedComposer, _StrictConstructor, _StrictResolver):
    """The pure-Python loader: strict (see the module docstring) and bounded while composing."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _StrictConstructor.__init__(self)
        _StrictResolver.__init__(self)


_FastLoader: type | None
try:
    from yaml._yaml import CParser

    class _CStrictLoader(CParser, _StrictConstructor, _StrictResolver):
        """libyaml's parser and composer with our constructor and resolver; checked by
        :func:`_check_events` first, since libyaml composes without asking us."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _StrictConstructor.__init__(self)
            _StrictResolver.__init__(self)

    _FastLoader = _CStrictLoader
except ImportError:  # PyYAML without libyaml: the pure-Python loader does everything
    _FastLoader = None


PYTHON_WORDING_CHARS = 16 * 1024
"""Longest document whose syntax error is worded by the pure-Python loader: re-reading costs some
4 ms per KiB, so at most about 60 ms. Hand-edited pool documents, where wording matters, are smaller."""


def _check_events(events: Iterator[yaml.Event]) -> None:
    """Raise :class:`_LimitError` at the first anchor, alias, level or node beyond the bounds."""
    depth = nodes = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            raise _LimitError(_alias_problem("alias", f"*{event.anchor}"), event.start_mark)
        if isinstance(event, yaml.NodeEvent):
            if event.anchor is not None:
                raise _LimitError(_alias_problem("anchor", f"&{event.anchor}"), event.start_mark)
            nodes += 1
            if nodes > MAX_NODES:
                raise _LimitError(_nodes_problem(), event.start_mark)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _LimitError(_depth_problem(), event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


COMPOSE_FIRST_CHARS = 3 * MAX_NODES // 2
"""Longest document composed before its bounds are checked: no text this short holds many more than
:data:`MAX_NODES` values, so composing first costs no more than the bound allows (a 1,000-pool
document is about 105,000 characters)."""
_STR_TAG = "tag:yaml.org,2002:str"


def _within_bounds(root: Node) -> bool:
    """Whether a composed document is within :data:`MAX_NODES` and :data:`MAX_DEPTH`: the verdict
    of :func:`_check_nodes` without its per-node bookkeeping (scalars are counted, not visited), so
    the common, valid document costs one visit per collection. Only a document beyond a bound is
    walked again by :func:`_check_nodes`, which finds the first offending node in document order."""
    nodes = 1
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, MappingNode):
            children = [item for pair in node.value for item in pair]
        elif isinstance(node, SequenceNode):
            children = node.value
        else:
            continue
        if depth > MAX_DEPTH:
            return False
        nodes += len(children)
        stack.extend([(child, depth + 1) for child in children if type(child) is not ScalarNode])
    return nodes <= MAX_NODES


def _check_nodes(root: Node) -> None:
    """:func:`_check_events` on a composed alias-free document: pre-order is document order."""
    nodes = 0
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise _LimitError(_nodes_problem(), node.start_mark)
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [item for pair in node.value for item in pair]
        else:
            continue
        if depth > MAX_DEPTH:
            raise _LimitError(_depth_problem(), node.start_mark)
        stack.extend((child, depth + 1) for child in reversed(children))


def _build(loader: Any, node: Node) -> object:
    """The value of an alias-free node, as :class:`_StrictConstructor` builds it.

    Plain strings, lists and mappings are built here; every other tag (ints, floats, booleans,
    nulls, timestamps, ...) and an unhashable key go to the constructor, so results and errors are
    the stock ones.
    """
    tag = node.tag
    if tag == _STR_TAG and isinstance(node, ScalarNode):
        return node.value
    if tag == Resolver.DEFAULT_SEQUENCE_TAG and isinstance(node, SequenceNode):
        return [_build(loader, child) for child in node.value]
    if tag == Resolver.DEFAULT_MAPPING_TAG and isinstance(node, MappingNode):
        keys = []
        seen: set[object] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                raise _LimitError(_alias_problem("merge key", "<<"), key_node.start_mark)
            key = _build(loader, key_node)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable: the constructor words it
                return loader.construct_object(node, deep=True)
            if duplicate:
                raise _DuplicateKeyError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {_shown(key)}",
                    key_node.start_mark,
                )
            keys.append(key)
        return {key: _build(loader, value) for key, (_, value) in zip(keys, node.value, strict=True)}
    return loader.construct_object(node, deep=True)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a block that only builds (unless someone else has
    paused it), and give it back as it was.

    Reading a pool document allocates several objects per value (nodes, marks, the built values,
    then the validated pools), all of them reachable until the end, so the collections they trigger
    find nothing to free; a 1,000-pool document triggered 55 while being composed alone, one of them
    a full collection, which walks every object of the daemon. Whatever is garbage afterwards is
    refcounted away or left to the next collection once the collector runs again.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _compose_first(loader_class: Any, text: str) -> object:
    """The single document of an alias-free ``text``: composed by libyaml, bounded, then built."""
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if not _within_bounds(root):
            _check_nodes(root)
        return _build(loader, root)
    finally:
        loader.dispose()


def _yaml_load(text: str, every: bool) -> list[object]:
    """The document (``every``: every document) of ``text``, bounded; raises ``yaml.YAMLError``.

    libyaml first; a document of up to :data:`PYTHON_WORDING_CHARS` that it refuses for its syntax
    is read again by the pure-Python loader, so that the error is worded as it always was (and a
    syntax libyaml alone refuses still loads). A longer one keeps libyaml's wording: reading a
    megabyte again in pure Python would cost seconds. Bounds are errors of their own: libyaml's
    verdict on them stands.
    """
    if _FastLoader is not None:
        try:
            if not every and len(text) <= COMPOSE_FIRST_CHARS and "&" not in text and "*" not in text:
                return [_compose_first(_FastLoader, text)]
            _check_events(yaml.parse(text, Loader=_FastLoader))
            return _run(_FastLoader, text, every)
        except _LimitError:
            raise
        except yaml.YAMLError:
            if len(text) > PYTHON_WORDING_CHARS:
                raise
        except UnicodeEncodeError:  # libyaml takes UTF-8; a lone surrogate is not: let Python say so
            pass
    return _run(_StrictSafeLoader, text, every)


def _run(loader_class: Any, text: str, every: bool) -> list[object]:
    loader = loader_class(text)
    try:
        if every:
            documents: list[object] = []
            while loader.check_data():
                documents.append(loader.get_data())
            return documents
        return [loader.get_single_data()]
    finally:
        loader.dispose()


def _yaml_error(source: str, exc: yaml.YAMLError) -> ConfigError:
    if isinstance(exc, _LimitError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return ConfigError(source, DOCUMENT_PATH, f"refused{where}: {exc.problem}")
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
    indentation). Raises :class:`ConfigErrors` with one ``<document>`` error on a syntax problem or
    a document beyond the bounds of :mod:`.limits`.
    """
    _check_size(text, source)
    try:
        with collector_paused():
            return _load(text, source, syntax)
    except RecursionError as exc:
        raise ConfigErrors([_too_deep(source)]) from exc


def load_documents(text: str, source: str) -> list[object]:
    """Every document of a YAML stream (``---`` separated), with the same strictness and bounds as
    :func:`load_document`; for manifests (``kubectl get -o yaml`` output, several ConfigMaps in one
    file), where several documents are the norm rather than a mistake.
    """
    _check_size(text, source)
    if _flow_too_deep(text):
        raise ConfigErrors([_too_deep(source)])
    try:
        return _yaml_load(text, every=True)
    except yaml.YAMLError as exc:
        raise ConfigErrors([_yaml_error(source, exc)]) from exc
    except RecursionError as exc:
        raise ConfigErrors([_too_deep(source)]) from exc


def _check_size(text: str, source: str) -> None:
    size = oversize(text)
    if size is not None:
        raise ConfigErrors([ConfigError(source, DOCUMENT_PATH, too_big_message(size))])


MAX_FLOW_DEPTH = 100
"""Deepest ``[``/``{`` nesting the pure-Python scanner is given (:data:`MAX_DEPTH` is checked later,
as the document is composed); real pool documents nest a handful of levels."""


def _too_deep(source: str) -> ConfigError:
    # Both loaders build nested collections recursively; thousands of levels exhaust the stack.
    return ConfigError(source, DOCUMENT_PATH, f"refused: {_depth_problem()}")


_NOT_BRACKETS = LazyPattern(r"[^\[\]{}]+")


def _flow_too_deep(text: str) -> bool:
    """Whether brackets nest deeper than :data:`MAX_FLOW_DEPTH`, counted without parsing.

    PyYAML's scanner re-checks every open flow level on every token, and scans up to 1,024
    characters ahead for a simple key, so ``[`` repeated a few thousand times costs seconds before
    the composer sees a single level: refuse it up front. Brackets inside quoted strings count too,
    so a (pathological) string of a hundred unbalanced brackets is refused as well.
    """
    if text.count("[") + text.count("{") <= MAX_FLOW_DEPTH:
        return False
    depth = 0
    for char in _NOT_BRACKETS.sub("", text):  # the loop runs over the brackets alone
        if char in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                return True
        elif char in "]}" and depth:
            depth -= 1
    return False


def _load(text: str, source: str, syntax: Syntax) -> object:
    if syntax == "json":
        return _load_json(text, source)
    if _flow_too_deep(text):
        raise ConfigErrors([_too_deep(source)])
    try:
        return _yaml_load(text, every=False)[0]
    except yaml.YAMLError as exc:
        raise ConfigErrors([_yaml_error(source, exc)]) from exc


def _load_json(text: str, source: str) -> object:
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_pairs)
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
    except ValueError as exc:  # Python's limit on converting a long integer
        digits = f"a number of more than {sys.get_int_max_str_digits()} digits"
        raise ConfigErrors([ConfigError(source, DOCUMENT_PATH, f"invalid JSON: {digits}")]) from exc
    problem = _json_shape(document)
    if problem is not None:
        raise ConfigErrors([ConfigError(source, DOCUMENT_PATH, f"refused: {problem}")])
    return document


def _json_shape(document: object) -> str | None:
    """Why a parsed JSON document is beyond the bounds, or ``None``; one pass, no recursion.

    JSON has no aliases and its parser is C, so a megabyte parses quickly; the bounds are checked
    afterwards so that a JSON document is held to the same shape as a YAML one.
    """
    nodes = 0
    stack: list[tuple[object, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return _nodes_problem()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return _depth_problem()
            children = value.values() if isinstance(value, dict) else value
            nodes += len(value) if isinstance(value, dict) else 0  # keys are nodes too, as in YAML
            stack.extend((child, depth + 1) for child in children)
    return None
