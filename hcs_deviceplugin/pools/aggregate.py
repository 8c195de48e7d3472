"""All pool ConfigMaps from all sources, merged into one PoolSet (POOLS.md, "Applying a change" 1-2).

Sources (the mounted directory, the API watch) each hand over the complete set of objects they see,
whenever it changes; the aggregator owns everything after that:

* **Newest copy wins.** The same ConfigMap (namespace, name) can arrive from both sources. The copy
  with the higher ``resourceVersion`` is used (compared as integers when both are digits, which the
  API's are in practice); a file copy has none and loses to an API copy; copies that cannot be
  ordered so (two file copies, opaque versions) go by which arrived last. When the winning copy
  disappears, the other is used again.
* **Per-object isolation.** Each object is parsed on its own (:mod:`.formats`) and keeps its last
  good parse while it is broken, so one bad edit never takes pools away; its errors are reported
  beside. An object that disappears from every source takes its pools with it. An object is parsed
  again only when its content changes, so a re-list costs comparisons, not parses.
* **Merge.** A pool name, or a resource name, defined by two objects is an error naming both (a
  resource name can clash when a pool sets its full ``resourceName``); the object later in
  (namespace, name) order loses that pool and keeps its others. Cards claimed by two pools are not
  decided here: the reconciler sends such a card to neither new claimant and reports it.
* **The node.** A NodeGroup config's pools depend on the node's labels
  (:class:`~hcs_deviceplugin.pools.node.NodeContext`); :meth:`PoolAggregator.set_node` parses those
  objects again and merges, so a changed label is a pool change like any other, and pools it does not
  change are untouched.
* **Quiet.** ``on_change(pools, errors)`` runs only when the PoolSet or the error list changed, and
  the same changes are logged once (errors at ERROR, resolutions and pool changes at INFO).

One lock serialises updates and notifications, so ``on_change`` sees states in the order they were
made; it runs on the calling source's thread and must not wait for another source's update.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Pool, PoolSet
from hcs_deviceplugin.pools.errors import DOCUMENT_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.formats import depends_on_node, parse_configmap_located
from hcs_deviceplugin.pools.limits import capped
from hcs_deviceplugin.pools.located import LocatedPool
from hcs_deviceplugin.pools.node import UNKNOWN_NODE, NodeContext
from hcs_deviceplugin.pools.objects import ConfigMapObject

log = logging.getLogger(__name__)

OnChange = Callable[[PoolSet, list[ConfigError]], None]
Parser = Callable[[ConfigMapObject], Sequence[LocatedPool]]
ObjectKey = tuple[str, str]
"""(namespace, name): one ConfigMap, whichever source delivered it."""

ErrorsByObject = Mapping[tuple[str, str], tuple[ConfigError, ...]]
"""(source, object) → its current errors; the labels of ``hcs_config_errors_total``."""


def object_label(key: ObjectKey) -> str:
    """How metrics and logs name an object: ``namespace/name``, or ``name`` without a namespace."""
    namespace, name = key
    return f"{namespace}/{name}" if namespace else name


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class ObjectResult:
    """What one object contributes to a merge: its last good pools (if any) and its current errors."""

    key: ObjectKey
    source: str
    pools: tuple[LocatedPool, ...] = ()
    errors: tuple[ConfigError, ...] = ()


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class Merged:
    """The merge of every object: one PoolSet, all errors in a stable order, and errors per object."""

    pools: PoolSet = field(default_factory=PoolSet)
    errors: tuple[ConfigError, ...] = ()
    by_object: ErrorsByObject = field(default_factory=lambda: MappingProxyType({}))


def parse_object(
    obj: ConfigMapObject, parser: Parser = parse_configmap_located
) -> tuple[LocatedPool, ...] | Exception:
    """Parse one object: its pools, or the exception (ConfigErrors, or a parser bug)."""
    try:
        return tuple(parser(obj))
    except Exception as exc:  # a parser bug must not take the other objects down with it
        return exc


def errors_of(source: str, failure: Exception) -> tuple[ConfigError, ...]:
    """The errors a failed parse of ``source`` reports; a parser bug becomes one error, not a crash.

    At most :data:`~hcs_deviceplugin.pools.limits.MAX_ERRORS_PER_OBJECT`, so a generated document
    wrong in each of 20,000 entries is one screen of log, not 20,000 lines.
    """
    if isinstance(failure, ConfigErrors) and failure.errors:
        return tuple(capped(failure.errors))
    log.error("parsing %s failed unexpectedly", source, exc_info=failure)
    return (ConfigError(source, DOCUMENT_PATH, f"internal error while parsing: {failure!r}"),)


def merge(
    results: Iterable[ObjectResult], source_errors: Mapping[str, Sequence[ConfigError]] | None = None
) -> Merged:
    """Merge objects in (namespace, name) order: errors of sources, then per object its errors and the
    pools it loses to an earlier object (see the module docstring)."""
    errors: list[ConfigError] = []
    by_object: dict[tuple[str, str], list[ConfigError]] = {}
    for source, found in sorted((source_errors or {}).items()):
        for error in found:
            errors.append(error)
            by_object.setdefault((source, error.source), []).append(error)
    owners: dict[str, Pool] = {}
    resource_owners: dict[str, Pool] = {}
    pools: list[Pool] = []
    for result in sorted(results, key=lambda r: r.key):
        mine = list(result.errors)
        for located in result.pools:
            pool = located.pool
            owner = owners.get(pool.name)
            serving = resource_owners.get(pool.resource_name)
            if owner is None and serving is None:
                owners[pool.name] = pool
                resource_owners[pool.resource_name] = pool
                pools.append(pool)
                continue
            if owner is not None:
                clash = f"pool {pool.name!r} is also defined in {owner.source}"
            else:
                assert serving is not None
                clash = (
                    f"resource {pool.resource_name!r} is also served by pool {serving.name!r} "
                    f"of {serving.source}"
                )
            mine.append(
                ConfigError(pool.source, located.path, f"{clash}, which wins; this definition is ignored")
            )
        errors += mine
        if mine:
            by_object.setdefault((result.source, object_label(result.key)), []).extend(mine)
    return Merged(
        PoolSet(tuple(pools)),
        tuple(errors),
        MappingProxyType({key: tuple(found) for key, found in by_object.items()}),
    )


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class _Copy:
    """One source's copy of an object, and when its current content arrived (for tie-breaks)."""

    obj: ConfigMapObject
    arrival: int


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class _ObjectState:
    """The winning copy last parsed, its last good pools, its current errors."""

    parsed: ConfigMapObject
    source: str
    good: tuple[LocatedPool, ...] | None = None
    errors: tuple[ConfigError, ...] = ()


def _newer(a: _Copy, b: _Copy) -> bool:
    """Whether copy ``a`` is newer than ``b`` (see "Newest copy wins" in the module docstring)."""
    na, nb = _as_number(a.obj.resource_version), _as_number(b.obj.resource_version)
    if na is not None and nb is not None and na != nb:
        return na > nb
    va, vb = a.obj.resource_version, b.obj.resource_version
    if bool(va) != bool(vb):
        return bool(va)
    return a.arrival > b.arrival


def _as_number(version: str) -> tuple[int, str] | None:
    """A digit string as a key that orders like its integer, or ``None`` for any other version.

    Not ``int()``: Python refuses to convert more than 4,300 digits, and a version is whatever the
    source sent. Without leading zeros, more digits is bigger, and equal lengths compare as text.
    """
    if not (version.isascii() and version.isdigit()):
        return None
    digits = version.lstrip("0")
    return len(digits), digits


def _same_content(a: ConfigMapObject, b: ConfigMapObject) -> bool:
    """Equal for parsing: everything but the version (a re-list bumps nothing else)."""
    return (a.name, a.namespace, a.source) == (b.name, b.namespace, b.source) and (
        a.data == b.data and a.labels == b.labels
    )


class PoolAggregator:
    """Merges the ConfigMaps of every source into one PoolSet; see the module docstring.

    ``update(source, objects)`` replaces everything ``source`` delivered before; ``errors`` are problems
    of the source itself (a directory that cannot be listed, a file that cannot be read), reported as
    they are: a source that cannot read an object should deliver its previous copy, so that the
    object's pools stay.
    """

    def __init__(
        self, on_change: OnChange, *, parser: Parser | None = None, node: NodeContext = UNKNOWN_NODE
    ) -> None:
        self._on_change = on_change
        self._node = node
        self._parser: Parser = parser or (lambda obj: parse_configmap_located(obj, node=self._node))
        self._lock = threading.RLock()
        self._copies: dict[str, dict[ObjectKey, _Copy]] = {}
        self._source_errors: dict[str, tuple[ConfigError, ...]] = {}
        self._objects: dict[ObjectKey, _ObjectState] = {}
        self._arrivals = itertools.count()
        self._merged = Merged()

    @property
    def current(self) -> PoolSet:
        """The merged PoolSet as last reported (each object's last good version)."""
        return self._merged.pools

    @property
    def errors(self) -> list[ConfigError]:
        """All current errors: of sources, then of objects in (namespace, name) order."""
        return list(self._merged.errors)

    def known_objects(self) -> list[tuple[str, str]]:
        """(source, object) of every object now read, good or bad, in the labels of
        :meth:`errors_by_object`: so an error counter can start at 0 for each before it goes bad."""
        with self._lock:
            return sorted((state.source, object_label(key)) for key, state in self._objects.items())

    def errors_by_object(self) -> dict[tuple[str, str], list[ConfigError]]:
        """(source, object) → current errors, for ``hcs_config_errors_total{source,object}``.

        ``object`` is ``namespace/name`` (:func:`object_label`) for an object's errors, and the
        failing path for a source's own errors; objects without errors are absent.
        """
        return {key: list(found) for key, found in self._merged.by_object.items()}

    def update(
        self,
        source: str,
        objects: Sequence[ConfigMapObject],
        *,
        errors: Sequence[ConfigError] = (),
        notify: bool = True,
    ) -> tuple[PoolSet, list[ConfigError]]:
        """Take ``objects`` as everything ``source`` sees now; return the merged state.

        ``on_change`` is called (when ``notify``) only if the PoolSet or the error list differs from
        what was last returned or reported.
        """
        with self._lock:
            self._store(source, objects, errors)
            self._reparse()
            return self._publish(notify)

    @property
    def node(self) -> NodeContext:
        """The node context NodeGroup configs are parsed with now."""
        return self._node

    def set_node(self, node: NodeContext, *, notify: bool = True) -> tuple[PoolSet, list[ConfigError]]:
        """Parse the objects that depend on the node (NodeGroup configs) again with ``node``."""
        with self._lock:
            if node == self._node:
                return self._merged.pools, list(self._merged.errors)
            self._node = node
            for state in self._objects.values():
                if depends_on_node(state.parsed):
                    self._parse(state)
            return self._publish(notify)

    def _publish(self, notify: bool) -> tuple[PoolSet, list[ConfigError]]:
        merged = merge(
            (ObjectResult(key, s.source, s.good or (), s.errors) for key, s in self._objects.items()),
            self._source_errors,
        )
        previous, self._merged = self._merged, merged
        if (merged.pools, merged.errors) != (previous.pools, previous.errors):
            _log_change(previous, merged)
            if notify:
                try:
                    self._on_change(merged.pools, list(merged.errors))
                except Exception:
                    log.exception("pool change handler failed")
        return merged.pools, list(merged.errors)

    def _store(self, source: str, objects: Sequence[ConfigMapObject], errors: Sequence[ConfigError]) -> None:
        before = self._copies.get(source, {})
        after: dict[ObjectKey, _Copy] = {}
        for obj in objects:
            old = before.get(obj.key)
            same = old is not None and old.obj == obj
            after[obj.key] = old if old is not None and same else _Copy(obj, next(self._arrivals))
        self._copies[source] = after
        if errors:
            self._source_errors[source] = tuple(errors)
        else:
            self._source_errors.pop(source, None)

    def _reparse(self) -> None:
        winners: dict[ObjectKey, tuple[str, _Copy]] = {}
        for source, copies in self._copies.items():
            for key, copy in copies.items():
                best = winners.get(key)
                if best is None or _newer(copy, best[1]):
                    winners[key] = (source, copy)
        for gone in self._objects.keys() - winners.keys():
            del self._objects[gone]
        for key, (source, copy) in winners.items():
            state = self._objects.get(key)
            if state is not None and _same_content(state.parsed, copy.obj):
                state.source = source
                continue
            if state is None:
                state = self._objects[key] = _ObjectState(copy.obj, source)
            state.parsed, state.source = copy.obj, source
            self._parse(state)

    def _parse(self, state: _ObjectState) -> None:
        outcome = parse_object(state.parsed, self._parser)
        if not isinstance(outcome, Exception):
            state.good, state.errors = outcome, ()
            return
        state.errors = errors_of(state.parsed.source, outcome)
        # The failure's traceback reaches this frame: kept here it would make a cycle holding the
        # object (a 1 MiB hostile text, say) until the next full collection.
        del outcome
        if state.good is not None:
            log.warning(
                "%s is invalid; keeping its last good version (pools: %s)",
                state.parsed.source,
                ", ".join(p.pool.name for p in state.good) or "none",
            )


def _log_change(before: Merged, after: Merged) -> None:
    old_errors, new_errors = set(before.errors), set(after.errors)
    for error in after.errors:
        if error not in old_errors:
            log.error(
                "pool config error: %s",
                error,
                extra={"config_source": error.source, "config_path": error.path},
            )
    for error in before.errors:
        if error not in new_errors:
            log.info("pool config error resolved: %s", error)
    if after.pools != before.pools:
        old, new = before.pools.by_name(), after.pools.by_name()
        log.info(
            "pools: added %s, removed %s, changed %s",
            sorted(new.keys() - old.keys()) or "none",
            sorted(old.keys() - new.keys()) or "none",
            sorted(n for n in new.keys() & old.keys() if new[n] != old[n]) or "none",
        )
