"""What the daemon's threads tell the control loop: plain immutable values on one queue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hcs_deviceplugin.layouts import LayoutRequest
from hcs_deviceplugin.model import HealthEvent, Inventory, PoolSet


@dataclass(frozen=True)
class PoolsChanged:
    poolset: PoolSet
    errors: tuple[str, ...]


@dataclass(frozen=True)
class HealthChanged:
    backend: str
    event: HealthEvent


@dataclass(frozen=True)
class BackendFailed:
    backend: str
    reason: str


@dataclass(frozen=True)
class Rediscovered:
    backend: str
    inventory: Inventory


@dataclass(frozen=True)
class LaidOut:
    """A partition layout finished: the backend's new inventory, or why it failed."""

    request: LayoutRequest
    inventory: Inventory | None
    error: str = ""


@dataclass(frozen=True)
class HeldListed:
    held: Mapping[str, frozenset[str]]
    started_at: float


@dataclass(frozen=True)
class Recompute:
    """Something outside the folded state changed (new holds, an applier that skipped a card)."""

    reason: str


@dataclass(frozen=True)
class Stop:
    pass


Event = PoolsChanged | HealthChanged | BackendFailed | Rediscovered | LaidOut | HeldListed | Recompute | Stop
