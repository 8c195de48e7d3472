"""Which device entries name the same card, decided from the entries alone (no inventory).

Used twice: inside one pool a card named twice is a config error, and across pools a card named by
two pools is a conflict the reconciler resolves (neither pool gets it) and the node report shows.
Two entries overlap when they use the same identity key with the same value and their ``node``
restrictions can hold at once (equal, or either absent). Entries that name one card through different
keys (a uuid and a pciAddress) cannot be matched without the inventory; the reconciler sees those.

A DKP ``pattern`` is a key like the others: two pools with the same pattern claim the same cards (the
``*`` of older DKP renderings claims every card, so two such pools leave every card to neither).
Different patterns that match one card need the inventory too; patterns with ``^`` or ``$`` match no
card id and claim nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import DeviceSelector, Pool


@field_repr
@dataclass(frozen=True, repr=False)
class DeviceKey:
    """Identity of a device entry for grouping: key kind, value, and the node it is limited to."""

    kind: str
    value: str
    node: str | None = None

    def __str__(self) -> str:
        text = f"{self.kind}={self.value}"
        return f"{text} on node {self.node}" if self.node is not None else text


def device_key(selector: DeviceSelector) -> DeviceKey | None:
    """The key of a selector, or ``None`` for a selector that names nothing."""
    for kind, value in (
        ("uuid", selector.uuid),
        ("inventoryID", selector.inventory_id),
        ("pciAddress", selector.pci_address),
    ):
        if value is not None:
            return DeviceKey(kind, value, selector.node)
    pattern = selector.pattern
    if pattern is not None and "^" not in pattern and "$" not in pattern:
        return DeviceKey("pattern", pattern, selector.node)
    return None


def selectors_overlap(a: DeviceSelector, b: DeviceSelector) -> bool:
    """Whether some card on some node would be matched by both ``a`` and ``b`` (same key and value)."""
    ka, kb = device_key(a), device_key(b)
    if ka is None or kb is None or (ka.kind, ka.value) != (kb.kind, kb.value):
        return False
    return ka.node is None or kb.node is None or ka.node == kb.node


def find_conflicts(pools: Iterable[Pool]) -> dict[DeviceKey, list[str]]:
    """Cards named by more than one pool: key → sorted names of the pools that claim it.

    A pure report for the reconciler and the node report; the parser does not reject these, because
    POOLS.md resolves them at apply time ("neither pool gets it"). An entry without ``node`` overlaps
    every node-limited entry of the same card, so each node where the claims meet gets its own key
    (``node`` set), and entries that are all node-less share one key with ``node=None``.
    """
    claims: dict[tuple[str, str], dict[str | None, set[str]]] = {}
    for pool in pools:
        for selector in pool.devices:
            key = device_key(selector)
            if key is not None:
                claims.setdefault((key.kind, key.value), {}).setdefault(key.node, set()).add(pool.name)
    conflicts: dict[DeviceKey, list[str]] = {}
    for (kind, value), by_node in claims.items():
        anywhere = by_node.get(None, set())
        for node, names in by_node.items():
            claimants = names | anywhere
            if len(claimants) > 1:
                conflicts[DeviceKey(kind, value, node)] = sorted(claimants)
    return conflicts
