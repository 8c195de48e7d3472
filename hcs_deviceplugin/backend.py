"""The Backend protocol every vendor implements, and loading backends from entry points.

A backend only discovers, partitions, watches health and describes what a container needs; the core
does everything else. A backend may also define ``close()``: the daemon calls it once on shutdown,
after the health stream has ended, to release library handles (e.g. NVML's reference count).

A backend that enforces a way of sharing a card between containers (beyond time-slicing, which needs
nothing from it) declares it in ``sharing_modes`` (a frozenset of names, e.g. ``{"mps"}``) and defines
``configure_sharing(requests)``: the core calls it after every reconcile with every card that must be
shared so now (:class:`~hcs_deviceplugin.model.SharingRequest` by card id: cards of such pools, and
cards a container still holds from one). It must return at once (record, and do the work on the
backend's own thread); a card missing from ``requests`` is no longer shared and may be torn down. A
card's sharing machinery that fails makes the card Unhealthy through the health stream.

Backends are found through the entry-point group ``hcs_deviceplugin.vendors``:
each entry point names a factory ``create_backend(config: BackendConfig) -> Backend``. A factory that
finds its library or sysfs missing raises :class:`BackendAbsent` with the reason, and the daemon goes
on with the other backends. A factory given an option it does not know, or a value it cannot use,
raises :class:`BackendOptionError` before it looks for hardware: that is the operator's mistake, and
it stops the start rather than quietly leaving the backend out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

from hcs_deviceplugin.entrypoints import entry_points
from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    Partition,
    SharingRequest,
    Unit,
)

ENTRY_POINT_GROUP = "hcs_deviceplugin.vendors"
PARTITION_FILL = -1
"""``Backend.partition`` count meaning "fill the card with this profile"."""

log = logging.getLogger(__name__)


@runtime_checkable
class Backend(Protocol):
    """The vendor interface, the whole of it (ARCHITECTURE.md)."""

    name: str

    def discover(self) -> Inventory:
        """Cards, partitions and links on this node; never raises for one bad card."""
        ...

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        """A blocking stream of health changes; the core runs it in its own thread.

        :class:`InventoryChanged` asks the core to call ``discover()`` again (new hardware appeared).
        The iterator ends when the backend's ``BackendConfig.stop`` event is set.
        """
        ...

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        """What a container needs for ``units`` (all of this backend). Pure: no I/O, no library call.

        ``options`` are the pool's pass-through options (``Pool.options``, e.g. a device list strategy a
        pool format carries); a backend ignores the keys it does not know.
        """
        ...

    def links(self) -> LinkMatrix:
        """Card-to-card link kind and bandwidth."""
        ...

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        """Make ``card`` hold ``count`` partitions of ``profile``; raise NotSupportedError if it cannot.

        ``count`` may be :data:`PARTITION_FILL`: as many as the card holds of that profile. The core
        calls this only for a card that no running container holds.
        """
        ...


def sharing_modes(backend: Backend) -> frozenset[str]:
    """The sharing modes ``backend`` enforces (none unless it declares ``sharing_modes``)."""
    modes: frozenset[str] = frozenset(getattr(backend, "sharing_modes", frozenset()))
    return modes


def configure_sharing(name: str, backend: Backend, requests: Mapping[str, SharingRequest]) -> None:
    """Hand ``requests`` to a backend that shares cards; a failure is logged, never raised."""
    configure = getattr(backend, "configure_sharing", None)
    if configure is None:
        return
    try:
        configure(requests)
    except Exception:
        log.exception("backend %s failed to take the cards to share", name)


class BackendAbsent(Exception):
    """The backend's library, driver or sysfs is not on this node; the message says what is missing."""


class BackendOptionError(ValueError):
    """A ``--backend-option`` key the backend does not know, or a value it cannot use.

    Not absence: the same typo is on every node, so reporting the backend absent would leave a
    whole cluster without it and only a log line to say why. :func:`load_backends` lets it through,
    and ``hcs-deviceplugin run`` exits with status 2 naming the backend and the key.
    """


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class BackendConfig:
    """What the daemon hands every backend factory.

    ``host_root`` prefixes every host path a backend reads (``/`` on a real node, a temp tree in tests).
    ``options`` are backend-specific settings from the command line (``--backend-option name.key=value``).
    ``stop`` is set when the daemon shuts down; health streams must end soon after.
    """

    host_root: Path = Path("/")
    options: Mapping[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)


BackendFactory = Callable[[BackendConfig], Backend]


def available_backend_names() -> list[str]:
    """Names of every backend installed through the entry-point group."""
    return sorted({ep.name for ep in entry_points(ENTRY_POINT_GROUP)})


def load_factory(name: str) -> BackendFactory:
    """The factory registered under ``name``; KeyError if no entry point has that name."""
    for ep in entry_points(ENTRY_POINT_GROUP):
        if ep.name == name:
            factory = cast(BackendFactory, ep.load())
            return factory
    raise KeyError(f"no backend named {name!r} in entry-point group {ENTRY_POINT_GROUP}")


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class LoadedBackends:
    """The result of starting the enabled backends: the ones running and why others are absent."""

    running: Mapping[str, Backend]
    absent: Mapping[str, str]


def load_backends(names: Sequence[str], config_for: Callable[[str], BackendConfig]) -> LoadedBackends:
    """Create each named backend; one that is absent or fails to start is reported, not fatal.

    A :class:`BackendOptionError` is fatal: it propagates, after the backends already created are
    closed, so that the caller can refuse to start.
    """
    running: dict[str, Backend] = {}
    absent: dict[str, str] = {}
    for name in names:
        try:
            factory = load_factory(name)
            running[name] = factory(config_for(name))
        except BackendOptionError:
            for created_name, created in running.items():
                close_backend(created_name, created)
            raise
        except BackendAbsent as exc:
            absent[name] = str(exc)
            log.warning("backend %s absent: %s", name, exc)
        except Exception as exc:  # a broken vendor must not take the daemon down
            absent[name] = f"failed to start: {exc!r}"
            log.exception("backend %s failed to start", name)
    return LoadedBackends(running=running, absent=absent)


def close_backend(name: str, backend: Backend) -> None:
    """Release a backend's library handles if it has an optional ``close()``: at stop, or when the
    start was refused after it was created. A failing ``close()`` is logged, never raised."""
    close = getattr(backend, "close", None)
    if not callable(close):
        return
    try:
        close()
    except Exception:
        log.exception("backend %s failed to close", name)
