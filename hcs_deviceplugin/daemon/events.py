"""What the daemon's threads tell the control loop: plain immutable values on one queue.

The loop tells them apart by type, never compares two and never logs one, so they carry no
generated ``__eq__``, ``__hash__`` or ``__repr__`` (``eq=False, repr=False``): each would be compiled
at every start for nothing. Each has a docstring, also so that ``dataclass`` does not build one
from the class's signature at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hcs_deviceplugin.model import HealthEvent, Inventory, PoolSet

if TYPE_CHECKING:
    from hcs_deviceplugin.layouts import LayoutRequest


@dataclass(frozen=True, eq=False, repr=False)
class PoolsChanged:
    """The merged pools of every source (the last good ones) and the current config errors."""

    poolset: PoolSet
    errors: tuple[str, ...]


@dataclass(frozen=True, eq=False, repr=False)
class HealthChanged:
    """One health event of one backend's card or partition."""

    backend: str
    event: HealthEvent


@dataclass(frozen=True, eq=False, repr=False)
class BackendFailed:
    """A backend's discovery or health stream failed: its cards go Unhealthy."""

    backend: str
    reason: str


@dataclass(frozen=True, eq=False, repr=False)
class Rediscovered:
    """A backend's inventory: discovered at start, or again when its hardware changed."""

    backend: str
    inventory: Inventory


@dataclass(frozen=True, eq=False, repr=False)
class LaidOut:
    """A partition layout finished: the backend's new inventory, or why it failed."""

    request: LayoutRequest
    inventory: Inventory | None
    error: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class HeldListed:
    """What kubelet's pod-resources API says running containers hold, and when it was asked."""

    held: Mapping[str, frozenset[str]]
    started_at: float


@dataclass(frozen=True, eq=False, repr=False)
class Recompute:
    """Something outside the folded state changed (new holds, an applier that skipped a card)."""

    reason: str


@dataclass(frozen=True, eq=False, repr=False)
class Stop:
    """The daemon is stopping: the loop ends at the batch that holds this event, applying none of it."""


Event = PoolsChanged | HealthChanged | BackendFailed | Rediscovered | LaidOut | HeldListed | Recompute | Stop
