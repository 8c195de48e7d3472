"""What the daemon's threads tell the control loop: plain immutable values on one queue.

The loop tells them apart by type and never compares two, so they carry no generated ``__eq__`` or
``__hash__`` (``eq=False``): each would be compiled at every start for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hcs_deviceplugin.layouts import LayoutRequest
from hcs_deviceplugin.model import HealthEvent, Inventory, PoolSet


@dataclass(frozen=True, eq=False)
class PoolsChanged:
    poolset: PoolSet
    errors: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class HealthChanged:
    backend: str
    event: HealthEvent


@dataclass(frozen=True, eq=False)
class BackendFailed:
    backend: str
    reason: str


@dataclass(frozen=True, eq=False)
class Rediscovered:
    backend: str
    inventory: Inventory


@dataclass(frozen=True, eq=False)
class LaidOut:
    """A partition layout finished: the backend's new inventory, or why it failed."""

    request: LayoutRequest
    inventory: Inventory | None
    error: str = ""


@dataclass(frozen=True, eq=False)
class HeldListed:
    held: Mapping[str, frozenset[str]]
    started_at: float


@dataclass(frozen=True, eq=False)
class Recompute:
    """Something outside the folded state changed (new holds, an applier that skipped a card)."""

    reason: str


@dataclass(frozen=True, eq=False)
class Stop:
    pass


Event = PoolsChanged | HealthChanged | BackendFailed | Rediscovered | LaidOut | HeldListed | Recompute | Stop
