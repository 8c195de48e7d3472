"""The vocabulary of the daemon as immutable values (see ARCHITECTURE.md, "Vocabulary").

Everything here is a frozen dataclass so that snapshots can be shared between threads without locks
and compared with ``==`` when the reconciler diffs desired state against running state. Nothing in
this module knows about a vendor, gRPC or YAML.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from hcs_deviceplugin.fieldrepr import field_repr

_T = TypeVar("_T")


class Health(enum.StrEnum):
    """Device health exactly as kubelet spells it (case-sensitive constants of v1beta1)."""

    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


class UnitKind(enum.StrEnum):
    """What one advertised kubelet device stands for before time-slicing."""

    CARD = "Card"
    PARTITION = "Partition"


class DeviceDelivery(enum.StrEnum):
    """How a pool's Allocate answer hands devices to the container runtime (POOLS.md, "deviceDelivery").

    Every mode carries the backend's environment, because variables such as a visible-devices list
    describe the whole set a container gets and CDI would let one device's value overwrite another's.

    * ``deviceSpecs``: the backend's device nodes and mounts as ``DeviceSpec``/``Mount`` (works with
      every runtime; device nodes in the OCI spec also survive a systemd daemon-reload);
    * ``env``: environment only, for nodes whose vendor container runtime adds the devices named by
      a visible-devices variable itself;
    * ``cdi-cri``: CDI device names in the CRI field ``cdi_devices`` (kubelet 1.28+, containerd 1.7+);
    * ``cdi-annotations``: the same names in a ``cdi.k8s.io/`` annotation (runtimes with CDI enabled
      that predate the CRI field).
    """

    DEVICE_SPECS = "deviceSpecs"
    ENV = "env"
    CDI_CRI = "cdi-cri"
    CDI_ANNOTATIONS = "cdi-annotations"

    @property
    def uses_cdi(self) -> bool:
        return self in (DeviceDelivery.CDI_CRI, DeviceDelivery.CDI_ANNOTATIONS)


class PoolApi(enum.StrEnum):
    """Which kubelet front end serves a pool's cards (POOLS.md, "api"): exactly one per card.

    * ``devicePlugin``: an extended resource through the device plugin API (one socket per pool);
    * ``dra``: devices in this node's ResourceSlice, allocated by the scheduler through
      ResourceClaims and prepared by our DRA kubelet plugin.
    """

    DEVICE_PLUGIN = "devicePlugin"
    DRA = "dra"


DRA_HOLD_PREFIX = "dra:"
"""What a card prepared for a ResourceClaim is held under (see :meth:`Pool.holder_key`)."""


class LinkKind(enum.StrEnum):
    """Kinds of card-to-card connection a backend can report, best first."""

    NVLINK = "NVLink"
    HCCS = "HCCS"
    XGMI = "xGMI"
    MLU_LINK = "MLU-Link"
    PCIE_SWITCH = "PCIe-switch"
    PCIE_HOST_BRIDGE = "PCIe-host-bridge"
    SAME_NUMA = "same-NUMA"
    CROSS_SOCKET = "cross-socket"


def _frozen_map(values: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(values or {}))


@field_repr
@dataclass(frozen=True, repr=False)
class Card:
    """One physical accelerator as discovered by a backend.

    ``id`` is the stable identity that pool ConfigMaps name (NVIDIA UUID, Ascend chip id, PCI address
    for sysfs vendors) and the kubelet device ID of a whole-card unit. ``index`` is the slot number
    the control plane uses to build an inventoryID; ``backend`` names the backend that owns the card
    so the core can route health and ContainerEdits without knowing what the vendor is.
    """

    id: str
    backend: str
    vendor: str
    model: str
    index: int
    pci_address: str = ""
    pci_vendor_id: int = 0
    pci_device_id: int = 0
    numa_node: int | None = None
    memory_bytes: int = 0
    health: Health = Health.HEALTHY
    attributes: Mapping[str, str] = field(default_factory=lambda: _frozen_map(None))

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", _frozen_map(self.attributes))


@field_repr
@dataclass(frozen=True, repr=False)
class Partition:
    """A piece of a card that a pool can hand out (MIG device, vNPU, vDCU...)."""

    id: str
    card_id: str
    profile: str
    memory_bytes: int = 0
    health: Health = Health.HEALTHY
    attributes: Mapping[str, str] = field(default_factory=lambda: _frozen_map(None))

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", _frozen_map(self.attributes))


REPLICA_SEPARATOR = "::"


def replica_unit_id(base_id: str, replica: int) -> str:
    """The kubelet device ID of time-slice replica ``replica`` of a card or partition."""
    return f"{base_id}{REPLICA_SEPARATOR}{replica}"


@field_repr
@dataclass(frozen=True, repr=False)
class Unit:
    """One kubelet device as a pool advertises it.

    A unit is a whole card, a partition, or replica ``replica`` (0-based) of either. ``id`` is what
    kubelet sees; ``card_id``/``partition_id`` map it back to hardware for ContainerEdits.
    """

    id: str
    card_id: str
    backend: str
    partition_id: str | None = None
    replica: int | None = None
    numa_node: int | None = None
    health: Health = Health.HEALTHY

    @property
    def hardware_id(self) -> str:
        """The card or partition this unit stands for (replicas of one share it)."""
        return self.partition_id or self.card_id


@field_repr
@dataclass(frozen=True, repr=False)
class DeviceSelector:
    """One entry of a pool's ``devices`` list: any one identity key names a card.

    ``pattern`` is NVIDIA's device plugin selector (DKP per-pool format, POOLS.md §2): matched against
    the card id by :func:`pattern_matches`, so unlike the other keys it may name many cards or none.
    """

    uuid: str | None = None
    inventory_id: str | None = None
    pci_address: str | None = None
    node: str | None = None
    pattern: str | None = None

    def describe(self) -> str:
        for key, value in (
            ("uuid", self.uuid),
            ("inventoryID", self.inventory_id),
            ("pciAddress", self.pci_address),
            ("pattern", self.pattern),
        ):
            if value:
                return f"{key}={value}"
        return "<empty selector>"


@field_repr
@dataclass(frozen=True, repr=False)
class Pool:
    """A validated pool: what to advertise under which resource name, and which cards it holds.

    ``replica_placement`` is ``spread`` (a multi-replica request gets distinct cards) or ``pack``
    (fill one card before the next); the allocator reads it.
    ``source`` says where it was read from (file or ConfigMap) so errors and reports can point at it.
    ``options`` carries format-specific knobs that a backend may honour (e.g. device list strategy);
    the core passes them through untouched.
    ``sharing`` names a way of sharing each unit's replicas that the backend enforces (``mps``); empty
    means time-slicing (or exclusive at one replica), which needs nothing from the backend. The core
    does not interpret the name: it asks the backend of each card (:class:`SharingRequest`), refuses
    cards whose backend does not offer it, and gives a container one replica at most.
    ``memory_per_replica`` (bytes) is the share of card memory each replica may pin, for a sharing
    mode that enforces one; ``None``: the card's memory divided by the replicas.
    ``device_delivery`` is the core's own choice of how Allocate hands the devices over
    (:class:`DeviceDelivery`).
    ``api`` says which front end serves the pool (:class:`PoolApi`); a DRA pool has no device plugin
    socket and its ``resource_name`` only names it in holds and reports.
    """

    name: str
    resource_name: str
    unit: UnitKind = UnitKind.CARD
    slices_per_unit: int = 1
    profile: str | None = None
    max_devices_per_node: int | None = None
    devices: tuple[DeviceSelector, ...] = ()
    source: str = ""
    replica_placement: str = "spread"
    options: Mapping[str, str] = field(default_factory=lambda: _frozen_map(None))
    device_delivery: DeviceDelivery = DeviceDelivery.DEVICE_SPECS
    sharing: str = ""
    memory_per_replica: int | None = None
    api: PoolApi = PoolApi.DEVICE_PLUGIN

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", _frozen_map(self.options))

    @property
    def time_sliced(self) -> bool:
        return self.slices_per_unit > 1

    def serving_key(self) -> tuple[str, UnitKind, int, str | None, str, PoolApi]:
        """What, when changed, needs a new gRPC server (not only a new ListAndWatch message)."""
        return (self.resource_name, self.unit, self.slices_per_unit, self.profile, self.sharing, self.api)

    def holder_key(self) -> str:
        """The name a running holder of one of this pool's cards is recorded under.

        A device plugin pool's holders are listed by pod-resources under its resource name; a DRA
        pool's are claims we prepared, recorded under ``dra:`` + the resource name. The two never
        compare equal, so a held card whose pool switches front end drains first.
        """
        if self.api is PoolApi.DRA:
            return DRA_HOLD_PREFIX + self.resource_name
        return self.resource_name

    def edit_options(self) -> Mapping[str, str]:
        """The options a backend's ``container_edits`` gets: :attr:`options`, plus ``sharing`` when the
        pool shares by a backend-enforced mode (the key is reserved for it)."""
        if not self.sharing:
            return self.options
        return {**self.options, SHARING_OPTION: self.sharing}


SHARING_OPTION = "sharing"
"""The edit option that tells a backend its units are shared by :attr:`Pool.sharing`."""


@field_repr
@dataclass(frozen=True, repr=False)
class SharingRequest:
    """What the core asks of a backend for one card of a pool with :attr:`Pool.sharing`: run ``mode``
    for ``replicas`` clients, each limited to ``memory_per_replica`` bytes (``None``: card memory /
    replicas)."""

    card_id: str
    mode: str
    replicas: int
    memory_per_replica: int | None = None


@field_repr
@dataclass(frozen=True, repr=False)
class PoolSet:
    """All pools of the node after parsing and validation. Immutable; compare with ``==``."""

    pools: tuple[Pool, ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.pools, key=lambda p: p.name))
        names = [p.name for p in ordered]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate pool names in PoolSet: {names}")
        object.__setattr__(self, "pools", ordered)

    def by_name(self) -> dict[str, Pool]:
        return {p.name: p for p in self.pools}

    def names(self) -> list[str]:
        return [p.name for p in self.pools]


@field_repr
@dataclass(frozen=True, repr=False)
class DeviceNode:
    """A device node to expose in the container (``DeviceSpec`` in v1beta1)."""

    container_path: str
    host_path: str
    permissions: str = "rw"


@field_repr
@dataclass(frozen=True, repr=False)
class Mount:
    """A host path to bind into the container."""

    container_path: str
    host_path: str
    read_only: bool = True


@field_repr
@dataclass(frozen=True, repr=False)
class ContainerEdits:
    """What a container needs for a set of units: env, device nodes, mounts, annotations, CDI names."""

    env: Mapping[str, str] = field(default_factory=lambda: _frozen_map(None))
    devices: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: _frozen_map(None))
    cdi_devices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", _frozen_map(self.env))
        object.__setattr__(self, "annotations", _frozen_map(self.annotations))

    def merged(self, other: ContainerEdits) -> ContainerEdits:
        """Combine edits of two backends the way kubelet merges responses: first writer wins."""
        env = dict(other.env)
        env.update(self.env)
        annotations = dict(other.annotations)
        annotations.update(self.annotations)
        return ContainerEdits(
            env=env,
            devices=_unique_by(self.devices + other.devices, lambda d: d.container_path),
            mounts=_unique_by(self.mounts + other.mounts, lambda m: m.container_path),
            annotations=annotations,
            cdi_devices=tuple(dict.fromkeys(self.cdi_devices + other.cdi_devices)),
        )


def _unique_by(items: Iterable[_T], key: Callable[[_T], Hashable]) -> tuple[_T, ...]:
    seen: set[Hashable] = set()
    out: list[_T] = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return tuple(out)


@field_repr
@dataclass(frozen=True, repr=False)
class Link:
    """How two cards are connected. ``bandwidth_gbps`` is per direction, 0 when unknown."""

    kind: LinkKind
    count: int = 1
    bandwidth_gbps: float = 0.0


@field_repr
@dataclass(frozen=True, repr=False)
class LinkMatrix:
    """Card-to-card links, symmetric. Pairs not listed are connected only through the host."""

    links: Mapping[frozenset[str], tuple[Link, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", MappingProxyType(dict(self.links)))

    def between(self, a: str, b: str) -> tuple[Link, ...]:
        return self.links.get(frozenset((a, b)), ())

    @staticmethod
    def from_pairs(pairs: Iterable[tuple[str, str, Link]]) -> LinkMatrix:
        collected: dict[frozenset[str], list[Link]] = {}
        for a, b, link in pairs:
            collected.setdefault(frozenset((a, b)), []).append(link)
        return LinkMatrix({k: tuple(v) for k, v in collected.items()})

    def merged(self, other: LinkMatrix) -> LinkMatrix:
        combined = dict(self.links)
        for key, links in other.links.items():
            combined[key] = combined.get(key, ()) + links
        return LinkMatrix(combined)


@field_repr
@dataclass(frozen=True, repr=False)
class Inventory:
    """Everything one backend (or, merged, the whole node) has: cards, partitions, links."""

    cards: tuple[Card, ...] = ()
    partitions: tuple[Partition, ...] = ()
    links: LinkMatrix = field(default_factory=LinkMatrix)

    def card(self, card_id: str) -> Card | None:
        for c in self.cards:
            if c.id == card_id:
                return c
        return None

    def merged(self, other: Inventory) -> Inventory:
        return Inventory(
            cards=self.cards + other.cards,
            partitions=self.partitions + other.partitions,
            links=self.links.merged(other.links),
        )


@field_repr
@dataclass(frozen=True, repr=False)
class HealthEvent:
    """A health change of one card or partition, as a backend reports it.

    ``device_id`` is a card id or a partition id; a card event applies to all its partitions.
    """

    device_id: str
    health: Health
    reason: str = ""


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class InventoryChanged:
    """A backend saw hardware appear that its last discovery did not know (e.g. a hot-added card).

    A backend's health stream yields this beside :class:`HealthEvent`; the daemon then calls
    ``discover()`` again for that backend. A card that merely disappears is reported as an Unhealthy
    :class:`HealthEvent` instead, so that it keeps its id and comes back Healthy when it returns.
    """

    reason: str


class NotSupportedError(Exception):
    """A backend does not offer an optional operation (e.g. partitioning)."""


_NON_LABEL = re.compile(r"[^a-z0-9]+")


def inventory_id(node_name: str, card: Card) -> str:
    """The control plane's inventoryID for ``card`` on ``node_name`` (POOLS.md, "Card identities").

    Node name lower-cased with every run of other characters replaced by ``-``, then
    ``-<slot>-<pciVendor>-<pciDevice>`` with 4 lower-case hex digits each, cut to 63 characters.
    """
    node = _NON_LABEL.sub("-", node_name.lower())
    text = f"{node}-{card.index}-{card.pci_vendor_id:04x}-{card.pci_device_id:04x}"
    return text[:63]


def selector_matches(selector: DeviceSelector, card: Card, node_name: str) -> bool:
    """Whether a pool's device entry names ``card`` on this node."""
    if selector.node is not None and selector.node != node_name:
        return False
    if selector.uuid is not None:
        return selector.uuid == card.id
    if selector.inventory_id is not None:
        return selector.inventory_id == inventory_id(node_name, card)
    if selector.pci_address is not None:
        return selector.pci_address.lower() == card.pci_address.lower()
    if selector.pattern is not None:
        return pattern_matches(selector.pattern, card.id)
    return False


def pattern_matches(pattern: str, text: str) -> bool:
    """NVIDIA's ``ResourcePattern.Matches``: ``*`` is the only wildcard, the rest is literal, and the
    match is unanchored (a substring search), so ``GPU-1`` matches ``GPU-12`` and ``^$`` matches nothing.

    Upstream compiles the pattern to a regexp per call; the literal pieces appearing in order is the
    same test without one, and cheap enough for every pool × card × selector of a reconcile.
    """
    position = 0
    for piece in pattern.split("*"):
        found = text.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def unit_ids(units: Sequence[Unit]) -> list[str]:
    return [u.id for u in units]
