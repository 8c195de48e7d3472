"""The node's state as one immutable value, and the pure fold of events into it.

The control loop is the only writer: it folds each batch of events into a new :class:`NodeState`
and publishes it. Nothing here blocks, calls a backend or touches a socket, so every rule of what an
event means is testable without threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from hcs_deviceplugin.daemon.events import (
    BackendFailed,
    Event,
    HealthChanged,
    HeldListed,
    LaidOut,
    PoolsChanged,
    Recompute,
    Rediscovered,
)
from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Health, Inventory, PoolSet

LayoutKey = tuple[str, str]


def _frozen(mapping: Mapping[str, object] | None = None) -> Mapping[str, object]:
    return MappingProxyType(dict(mapping or {}))


# Made and read within one pass of the control loop, on its thread: not frozen, so a start compiles no
# __setattr__ or __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class Transition:
    """A card or partition whose health changed in this fold (logged and counted by the caller)."""

    backend: str
    device_id: str
    health: Health
    reason: str


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class NodeState:
    """Everything the desired pools are computed from, except holds (see holds.HoldBook)."""

    inventories: Mapping[str, Inventory] = field(default_factory=lambda: MappingProxyType({}))
    health: Mapping[str, Health] = field(default_factory=lambda: MappingProxyType({}))
    failed: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    poolset: PoolSet = field(default_factory=PoolSet)
    config_errors: tuple[str, ...] = ()
    listed_held: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    held_known: bool = False
    """A pod-resources List has answered since this daemon started."""
    layout_attempts: Mapping[LayoutKey, str] = field(default_factory=lambda: MappingProxyType({}))
    """(card, profile) → "" when laid out, else the error; not retried until pools or inventory change."""
    layouts_running: frozenset[LayoutKey] = frozenset()

    def inventory(self) -> Inventory:
        merged = Inventory()
        for name in sorted(self.inventories):
            merged = merged.merged(self.inventories[name])
        return merged


# Made and read within one pass of the control loop, on its thread: not frozen, so a start compiles no
# __setattr__ or __delattr__ for it; never compared.
@dataclass(eq=False, repr=False)  # never logged: no __repr__ either
class Folded:
    """One event folded into the state: the new state, whether it changed, the health transitions."""

    state: NodeState
    changed: bool
    transitions: tuple[Transition, ...] = ()
    listed_at: float | None = None


def fold(state: NodeState, event: Event) -> Folded:
    """``state`` after ``event``; ``changed`` says whether the desired pools may differ."""
    if isinstance(event, PoolsChanged):
        attempts = state.layout_attempts if event.poolset == state.poolset else MappingProxyType({})
        new = replace(state, poolset=event.poolset, config_errors=event.errors, layout_attempts=attempts)
        return Folded(new, True)
    if isinstance(event, HealthChanged):
        device = event.event.device_id
        previous = state.health.get(device)
        if previous == event.event.health:
            return Folded(state, False)
        health = dict(state.health)
        health[device] = event.event.health
        transition = Transition(event.backend, device, event.event.health, event.event.reason)
        return Folded(replace(state, health=MappingProxyType(health)), True, (transition,))
    if isinstance(event, BackendFailed):
        return _backend_failed(state, event)
    if isinstance(event, Rediscovered):
        return Folded(_with_inventory(state, event.backend, event.inventory), True)
    if isinstance(event, LaidOut):
        return _laid_out(state, event)
    if isinstance(event, HeldListed):
        changed = not state.held_known or dict(event.held) != dict(state.listed_held)
        new = replace(state, listed_held=MappingProxyType(dict(event.held)), held_known=True)
        return Folded(new, changed, listed_at=event.started_at)
    if isinstance(event, Recompute):
        return Folded(state, True)
    return Folded(state, False)


def _backend_failed(state: NodeState, event: BackendFailed) -> Folded:
    failed = dict(state.failed)
    failed[event.backend] = event.reason
    health = dict(state.health)
    transitions = []
    for card in state.inventories.get(event.backend, Inventory()).cards:
        if health.get(card.id, card.health) is not Health.UNHEALTHY:
            transitions.append(Transition(event.backend, card.id, Health.UNHEALTHY, event.reason))
        health[card.id] = Health.UNHEALTHY
    new = replace(state, failed=MappingProxyType(failed), health=MappingProxyType(health))
    return Folded(new, True, tuple(transitions))


def _with_inventory(state: NodeState, backend: str, inventory: Inventory) -> NodeState:
    """A fresh inventory replaces the old one; health events about its old devices are forgotten."""
    failed = {k: v for k, v in state.failed.items() if k != backend}
    old = state.inventories.get(backend, Inventory())
    forget = {c.id for c in old.cards} | {p.id for p in old.partitions}
    health = {k: v for k, v in state.health.items() if k not in forget}
    inventories = dict(state.inventories)
    inventories[backend] = inventory
    attempts = {k: v for k, v in state.layout_attempts.items() if not v}
    return replace(
        state,
        inventories=MappingProxyType(inventories),
        failed=MappingProxyType(failed),
        health=MappingProxyType(health),
        layout_attempts=MappingProxyType(attempts),
    )


def _laid_out(state: NodeState, event: LaidOut) -> Folded:
    key = (event.request.card_id, event.request.profile)
    running = state.layouts_running - {key}
    if event.inventory is None:
        attempts = dict(state.layout_attempts)
        attempts[key] = event.error
        new = replace(state, layouts_running=running, layout_attempts=MappingProxyType(attempts))
        return Folded(new, True)
    new = _with_inventory(state, event.request.backend, event.inventory)
    attempts = dict(new.layout_attempts)
    attempts[key] = ""
    return Folded(replace(new, layouts_running=running, layout_attempts=MappingProxyType(attempts)), True)


def start_layouts(state: NodeState, keys: frozenset[LayoutKey]) -> NodeState:
    """Mark layouts as handed to the supervisor so the next fold does not ask for them again."""
    return replace(state, layouts_running=state.layouts_running | keys)
