"""The entries a source's previous parse validated, so that a new parse reuses those left unchanged.

A 1,000-pool document changes one pool at a time, yet each change hands over the whole text, and
checking every entry again cost a third of reading it. Checking an entry is a pure function of the
entry's plain data and of its context (the document's resource prefixes, the source named in the
result), so an entry written exactly as one of the previous parse of the same source, in the same
context, has the same result, and the result (an immutable value) can be handed out again.

"Written exactly as" is equality of :func:`entry_key`, the entry's ``repr``, not ``==``: Python takes
``1``, ``1.0`` and ``True`` for one value, and ``slicesPerUnit: true`` is an error where ``1`` is
not. The ``repr`` of the plain data a document loads into (strings, numbers, booleans, ``None``,
dates, lists, mappings, in document order) tells every one of those types and values apart, so two
entries with one key are the same data. Only valid entries are remembered: an entry with a problem
is checked again each time, so its errors are found and worded as on the first parse. Checks across
entries (a pool name or resource given twice) are not the entry's own and are always made.

Memory stays bounded: each source keeps the entries of its last parse only (the ones a change most
likely leaves alone), for the :data:`MAX_SOURCES` sources parsed last, and no more than
:data:`MAX_REMEMBERED_CHARS` of keys over all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_SOURCES = 64
"""Sources whose last parse is kept; a node reads a handful of pool documents, so the rest are
sources gone (a ConfigMap deleted, a file renamed) whose entries would never be asked for."""

MAX_REMEMBERED_CHARS = 1024 * 1024
"""Most characters of entry keys kept over all sources: some ten 1,000-pool documents. The keys and
the pools they map to are what this costs, and a 1 MiB document (a hostile one, say) must not leave
megabytes behind for every source that sent one."""


def entry_key(entry: object) -> str:
    """What two entries share when they are the same data, types included (see the module docstring)."""
    return repr(entry)


class LastParse(Generic[T]):
    """Per source: the context of its last parse and what each valid entry of it became.

    Safe to use from several threads: a parse reads one mapping and stores another whole; the lock
    keeps eviction and the character count from racing another source's store.
    """

    def __init__(self, max_sources: int = MAX_SOURCES, max_chars: int = MAX_REMEMBERED_CHARS) -> None:
        self._max_sources = max_sources
        self._max_chars = max_chars
        self._last: dict[str, tuple[Hashable, Mapping[str, T], int]] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def previous(self, source: str, context: Hashable) -> Mapping[str, T]:
        """Entry key → result, from the last parse of ``source`` if it had the same ``context``."""
        last = self._last.get(source)
        if last is None or last[0] != context:
            return {}
        return last[1]

    def remember(self, source: str, context: Hashable, entries: Mapping[str, T]) -> None:
        """Keep ``entries`` (entry key → result) as ``source``'s last parse, in place of the one before;
        entries whose keys alone are over the character bound are not kept (nor is the one before)."""
        chars = sum(map(len, entries))
        with self._lock:
            before = self._last.pop(source, None)
            if before is not None:
                self._chars -= before[2]
            if chars > self._max_chars:
                return
            self._last[source] = (context, entries, chars)
            self._chars += chars
            while len(self._last) > self._max_sources or self._chars > self._max_chars:
                self._chars -= self._last.pop(next(iter(self._last)))[2]

    def forget(self) -> None:
        """Drop every remembered parse: the next parse of each source checks every entry."""
        with self._lock:
            self._last.clear()
            self._chars = 0
