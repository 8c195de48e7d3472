"""A simple YAML document's values built straight from libyaml's parser events, without nodes.

libyaml's composer makes a node and two marks for every value, and :mod:`.document` then turns each
node into its value: more than half the cost of reading a 1,000-pool document. Building the values
from the parser's events skips the nodes. It is done only for a *simple* document, the kind nearly
every pool document is: a single document whose values are untagged mappings, lists and scalars
(strings, and the integers, floats, booleans and nulls the loader's own constructor builds), with
no anchor or alias, no key that is a collection, a merge key or given twice, within
:data:`~.limits.MAX_DEPTH` and :data:`~.limits.MAX_NODES`, and no syntax error. For anything else
:func:`document_from_events` answers :data:`NOT_SIMPLE`, and the caller reads the text the full way,
which decides and words every error exactly as it always did. So no document reads differently
through here; a simple one reads faster, a broken one a little slower (it is parsed twice).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import ScalarNode

from hcs_deviceplugin.pools.limits import MAX_DEPTH, MAX_NODES

NOT_SIMPLE: Any = object()
"""What :func:`document_from_events` answers for a document it leaves to the full reading."""

_STR_TAG = "tag:yaml.org,2002:str"
_CONSTRUCTED_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null"))
"""Scalar tags built by the loader's constructor here; any other (timestamp, merge key, ...) is not
simple."""
_SHARED_TAGS = frozenset(
    (_STR_TAG, "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null")
)
"""Tags whose value one plain text always builds, and which is immutable and compared by value:
built once and shared (a float is not shared, so that two ``.nan`` stay two objects
as the full reading builds them)."""
MAX_SHARED_CHARS = 64
"""Longest plain text whose value goes into ``plain``: keys, flags and ids repeat; a long text
rarely does, and would be held on to."""
_ABSENT: Any = object()
"""No key waiting for its value; no value known for a text."""
_AT_CONTENT: Any = object()


def document_from_events(loader: Any, plain: dict[str, object]) -> object:
    """The value of the single document ``loader`` (libyaml's parser with the strict resolver and
    constructor of :mod:`.document`) holds, or :data:`NOT_SIMPLE`; ``None`` for an empty stream.

    ``plain`` maps plain scalar texts to their values as loaders of this class build them; it is
    read and filled here, so that a text seen before (a key, ``true``, ``1``) costs one look-up.
    The owner bounds it. The loader is left part-read; its owner disposes of it.
    """
    try:
        return _build(loader, plain)
    except yaml.YAMLError:  # a syntax error, or a scalar the constructor refuses
        return NOT_SIMPLE


def _build(loader: Any, plain: dict[str, object]) -> object:
    get = loader.get_event
    opened = _open_document(get)
    if opened is not _AT_CONTENT:
        return opened
    resolve = loader.resolve
    construct = loader.construct_object
    root: object = None
    into: Any = None  # the collection being filled (None: the root is next)
    in_list = False
    key: Any = _ABSENT  # in a mapping: the key waiting for its value
    stack: list[tuple[Any, bool]] = []  # the collections around ``into``
    nodes = 0
    while True:
        event = get()
        kind = type(event)
        if kind is ScalarEvent:
            nodes += 1
            if nodes > MAX_NODES or event.tag is not None or event.anchor is not None:
                return NOT_SIMPLE
            value = plain.get(event.value, _ABSENT) if event.implicit[0] else _ABSENT
            if value is _ABSENT:
                value = _scalar(event, plain, resolve, construct)
                if value is NOT_SIMPLE:
                    return NOT_SIMPLE
            if in_list:
                into.append(value)
            elif key is not _ABSENT:
                into[key] = value
                key = _ABSENT
            elif into is None:
                root = value
            elif value in into:  # a key given twice
                return NOT_SIMPLE
            else:
                key = value
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            nodes += 1
            if nodes > MAX_NODES or event.tag is not None or event.anchor is not None:
                return NOT_SIMPLE
            if len(stack) >= MAX_DEPTH:
                return NOT_SIMPLE
            value = {} if kind is MappingStartEvent else []
            if in_list:
                into.append(value)
            elif key is not _ABSENT:
                into[key] = value
                key = _ABSENT
            elif into is None:
                root = value
            else:  # a collection as a key
                return NOT_SIMPLE
            stack.append((into, in_list))
            into, in_list = value, kind is SequenceStartEvent
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            into, in_list = stack.pop()
        elif kind is DocumentEndEvent:
            return root if type(get()) is StreamEndEvent else NOT_SIMPLE
        else:  # an alias
            return NOT_SIMPLE


def _open_document(get: Any) -> object:
    """Read up to the first document's content: ``_AT_CONTENT`` there, ``None`` for an empty stream."""
    if type(get()) is not StreamStartEvent:
        return NOT_SIMPLE
    event = get()
    if type(event) is StreamEndEvent:
        return None
    return _AT_CONTENT if type(event) is DocumentStartEvent else NOT_SIMPLE


def _scalar(event: Any, plain: dict[str, object], resolve: Any, construct: Any) -> object:
    """The value of a scalar not built before in this document (remembered in ``plain`` where
    :data:`_SHARED_TAGS` allows), as the loader's resolver and constructor make it, or NOT_SIMPLE."""
    text = event.value
    tag = resolve(ScalarNode, text, event.implicit)
    if tag == _STR_TAG:
        value: object = text
    elif tag in _CONSTRUCTED_TAGS:
        value = construct(ScalarNode(tag, text, event.start_mark, event.end_mark, event.style), deep=True)
    else:
        return NOT_SIMPLE
    if event.implicit[0] and tag in _SHARED_TAGS and len(text) <= MAX_SHARED_CHARS:
        plain[text] = value
    return value
