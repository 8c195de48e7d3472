"""Rebuilding the spec files from the inventory, on the server applier's thread (never on Allocate).

The applier calls :meth:`CdiPublisher.publish` with each inventory before it advertises anything, so
a card is in the spec before any pool offers it, and a card gone from the inventory leaves the spec
at the same time as it leaves the pools. Most applies come from a health change or a hold and carry
the very card objects of the last discovery: those return at once. After a (re)discovery the specs
are built again, since what a backend knows of the host (device nodes, minors) may have changed even
where a card's values did not, and only a file whose bytes change is rewritten.

One entry per card and per partition of every running backend, whether a pool serves it or not:
the spec describes the node, and a card moving between pools keeps its name. What an entry holds
comes from the backend: its optional ``cdi_edits(units)`` (what the device needs regardless of how
a pool delivers it), else its ``container_edits(units)`` with no pool options.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from hcs_deviceplugin.backend import Backend
from hcs_deviceplugin.cdi.files import SpecDirectory
from hcs_deviceplugin.cdi.hostnodes import read_facts
from hcs_deviceplugin.cdi.names import device_name, kinds_of, qualified_name
from hcs_deviceplugin.cdi.spec import JsonObject, build_spec
from hcs_deviceplugin.model import Card, ContainerEdits, Inventory, Partition, Unit

log = logging.getLogger(__name__)


def spec_edits(backend: Backend, unit: Unit) -> ContainerEdits:
    """What the spec entry of ``unit`` holds (see the module docstring)."""
    cdi_edits: Callable[[Sequence[Unit]], ContainerEdits] | None = getattr(backend, "cdi_edits", None)
    if callable(cdi_edits):
        return cdi_edits([unit])
    return backend.container_edits([unit], None)


def hardware_units(inventory: Inventory) -> list[Unit]:
    """One unit per card and per partition: what a spec entry stands for."""
    units = [Unit(id=c.id, card_id=c.id, backend=c.backend) for c in inventory.cards]
    backend_of = {c.id: c.backend for c in inventory.cards}
    units += [
        Unit(id=p.id, card_id=p.card_id, backend=backend_of[p.card_id], partition_id=p.id)
        for p in inventory.partitions
        if p.card_id in backend_of
    ]
    return units


def _same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """The same card and partition objects in the same order: a check in nanoseconds per card, where
    comparing values costs a dataclass copy each (cards change objects only on rediscovery)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class CdiPublisher:
    """Keeps ``directory``'s files of ours equal to the specs of the current inventory."""

    def __init__(
        self, directory: Path, backends: Mapping[str, Backend], host_root_of: Callable[[str], Path]
    ) -> None:
        self.files = SpecDirectory(directory)
        self._backends = dict(backends)
        self.kinds: Mapping[str, str] = kinds_of(backends)
        self._host_root_of = host_root_of
        self._lock = threading.Lock()
        self._written = False
        self._pending: frozenset[str] = frozenset()
        self._seen: tuple[Card | Partition, ...] = ()
        self._started = False
        self.names: frozenset[str] = frozenset()
        """Qualified names in the files now (read by views and tests)."""
        self.last_error = ""

    def publish(self, inventory: Inventory, discovered: Collection[str] | None = None) -> bool:
        """Rewrite the specs if the hardware changed; False (and ``last_error``) if writing failed.

        ``discovered`` names the backends whose inventory is known (None: all). The file of a running
        backend that has not answered yet is left as it is: after a daemon restart, containers being
        created for pods allocated before it still resolve their names. A file of a backend that is
        not running at all is removed.
        """
        pending = frozenset(self._backends) - frozenset(self._backends if discovered is None else discovered)
        objects: tuple[Card | Partition, ...] = (*inventory.cards, *inventory.partitions)
        with self._lock:
            try:
                changes = self._publish_locked(inventory, pending, objects)
            except OSError as err:
                self.last_error = f"cannot write CDI specs in {self.files.directory}: {err}"
                log.error("%s", self.last_error)
                return False
        if changes:
            log.info("CDI specs in %s: %s", self.files.directory, "; ".join(changes))
        return True

    def _publish_locked(
        self, inventory: Inventory, pending: frozenset[str], objects: tuple[Card | Partition, ...]
    ) -> list[str]:
        if not self._started:
            for path in self.files.remove_temp_files():
                log.info("CDI: removed %s, left by a writer that did not finish", path)
            self._started = True
        if self._written and pending == self._pending and _same_objects(objects, self._seen):
            return []  # the usual apply (a health change, a hold): the same discovery as last time
        documents, names = self._documents(inventory, pending)
        changes = self.files.sync(documents, keep=pending)  # rewrites only files whose bytes change
        self._written, self._pending, self._seen = True, pending, objects
        self.names = frozenset(names)
        self.last_error = ""
        return changes

    def _documents(
        self, inventory: Inventory, pending: frozenset[str]
    ) -> tuple[dict[str, JsonObject], list[str]]:
        by_backend: dict[str, list[tuple[str, ContainerEdits]]] = {}
        for unit in hardware_units(inventory):
            backend = self._backends.get(unit.backend)
            if backend is None or unit.backend in pending:
                continue
            try:
                edits = spec_edits(backend, unit)
            except Exception as exc:  # one card the backend cannot describe must not drop the others
                log.warning("CDI: no spec entry for %s (backend %s): %s", unit.id, unit.backend, exc)
                continue
            by_backend.setdefault(unit.backend, []).append((device_name(unit.hardware_id), edits))
        documents: dict[str, JsonObject] = {}
        names: list[str] = []
        for name, entries in by_backend.items():
            paths = [d.host_path for _, edits in entries for d in edits.devices]
            facts = read_facts(self._host_root_of(name), paths)
            document = build_spec(self.kinds[name], entries, facts)
            if document is not None:
                documents[name] = document
                names += [qualified_name(document["kind"], d["name"]) for d in document["devices"]]
        return documents, names
