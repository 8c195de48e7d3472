"""The native pool format (POOLS.md §1, ``version: v1``): text in, validated ``Pool`` values out.

Strict on purpose: a typo in a key would otherwise silently drop a pool or a card, and a device plugin
that quietly advertises the wrong thing is worse than one that refuses the config and says why. Every
problem is collected (not just the first) with the path of the field, so one edit fixes them all.

Choices where POOLS.md is silent (kept here so that users and tests agree):

* ``scope`` is ``node`` (default) or ``cluster``. A cluster pool's resource domain is ``cluster.`` +
  the document's ``resourcePrefix`` — ``cluster.gpu.deckhouse.io`` by default, and also when
  ``resourcePrefix`` is given (always prefixed, never de-duplicated).
* ``version`` is required once the document defines a pool; a document that defines none (empty,
  only comments, ``{}``, ``pools: []``, ``version: v1`` alone) is valid without it, since there is
  nothing to interpret. It means "no pools from this document" (pools it defined before are
  withdrawn), and is logged as a warning (:func:`warn_no_pools`): more often a truncated write or an
  empty template value than the intent.
* An optional key given as ``null`` counts as absent (templating tools render empty values so).
* ``unit`` is case-sensitive: ``Card``, ``Partition`` or ``MIG`` (an alias of ``Partition``).
* ``deviceDelivery`` is ``deviceSpecs`` (default), ``env``, ``cdi-cri`` or ``cdi-annotations``
  (:class:`~hcs_deviceplugin.model.DeviceDelivery`), case-sensitive.
* ``api`` is ``devicePlugin`` (default) or ``dra`` (:class:`~hcs_deviceplugin.model.PoolApi`),
  case-sensitive. A DRA pool is published in a ResourceSlice instead of a device plugin socket; it
  takes no ``sharing`` and no ``deviceDelivery`` (claims are always delivered through CDI), and
  ``slicesPerUnit`` must be 1 (DRA shares a device through the claim, not through replicas).
* ``pciAddress`` must be ``dddd:bb:dd.f`` (domain, bus, device ≤ 1f, function ≤ 7, hex); it is stored
  lower-case. ``node`` must be a DNS-1123 subdomain (a Kubernetes node name).
* Two entries of one pool name the same card when they share key and value and their ``node`` can
  both hold (see :mod:`hcs_deviceplugin.pools.conflicts`); that is an error. The same card in two
  pools is not: the reconciler resolves it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.lazyre import LazyPattern
from hcs_deviceplugin.model import DeviceDelivery, DeviceSelector, Pool, PoolApi, UnitKind
from hcs_deviceplugin.pools.conflicts import device_key
from hcs_deviceplugin.pools.delivery import DELIVERIES
from hcs_deviceplugin.pools.document import Syntax, collector_paused, load_document
from hcs_deviceplugin.pools.errors import DOCUMENT_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.fields import (
    MISSING,
    Report,
    check_keys,
    child,
    describe_value,
    integer,
    item,
    optional,
    string,
)
from hcs_deviceplugin.pools.limits import shorten
from hcs_deviceplugin.pools.names import (
    validate_dns1123_subdomain,
    validate_extended_resource_name,
    validate_pool_name,
)
from hcs_deviceplugin.pools.quantity import parse_bytes
from hcs_deviceplugin.pools.reuse import LastParse, entry_key

log = logging.getLogger(__name__)

VERSION = "v1"
DEFAULT_RESOURCE_PREFIX = "gpu.deckhouse.io"
CLUSTER_SCOPE_PREFIX = "cluster."
MIN_SLICES_PER_UNIT = 1
MAX_SLICES_PER_UNIT = 64

SCOPE_NODE = "node"
SCOPE_CLUSTER = "cluster"
SCOPES = (SCOPE_NODE, SCOPE_CLUSTER)

UNIT_ALIASES: Mapping[str, UnitKind] = {
    "Card": UnitKind.CARD,
    "Partition": UnitKind.PARTITION,
    "MIG": UnitKind.PARTITION,
}

TOP_LEVEL_KEYS = ("version", "resourcePrefix", "pools")
POOL_KEYS = (
    "name",
    "scope",
    "unit",
    "slicesPerUnit",
    "profile",
    "maxDevicesPerNode",
    "replicaPlacement",
    "resourceName",
    "sharing",
    "memoryPerReplica",
    "devices",
    "deviceDelivery",
    "api",
)
DEFAULT_SHARING = "timeSlicing"
"""``sharing`` spelled out for the default: replicas time-slice the card, nothing enforces a share."""
SHARING_RE = LazyPattern(r"[a-z][a-z0-9-]{0,31}")
REPLICA_PLACEMENTS = ("spread", "pack")
IDENTITY_KEYS = ("uuid", "inventoryID", "pciAddress")
DEVICE_KEYS = (*IDENTITY_KEYS, "node")

PCI_ADDRESS_RE = LazyPattern(r"[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]")

LAST_PARSE: LastParse[Pool] = LastParse()
"""Each source's pools of its last parse by entry (:mod:`.reuse`): a change re-checks only the
entries it changed."""


def _device(entry: object, path: str, report: Report) -> DeviceSelector | None:
    if not isinstance(entry, Mapping):
        report.add(
            path, f"must be a mapping with one of {', '.join(IDENTITY_KEYS)}, got {describe_value(entry)}"
        )
        return None
    start = report.mark()
    check_keys(entry, DEVICE_KEYS, path, report)
    present = [k for k in IDENTITY_KEYS if k in entry]
    values: dict[str, str | None] = {}
    if not present:
        report.add(path, f"needs exactly one of {', '.join(IDENTITY_KEYS)}; has none")
    elif len(present) > 1:
        report.add(path, f"needs exactly one of {', '.join(IDENTITY_KEYS)}; has {' and '.join(present)}")
    else:
        key = present[0]
        value = string(entry[key], child(path, key), report)
        if value is not None and key == "pciAddress":
            value = value.lower()
            if not PCI_ADDRESS_RE.fullmatch(value):
                report.add(
                    child(path, key),
                    f"{shorten(repr(entry[key]))} is not a PCI address like '0000:17:00.0' "
                    "(domain:bus:device.function, hex, device <= 1f, function <= 7)",
                )
        values[key] = value
    node: str | None = None
    raw_node = optional(entry, "node")
    if raw_node is not MISSING:
        node = string(raw_node, child(path, "node"), report)
        if node is not None and (problem := validate_dns1123_subdomain(node)) is not None:
            report.add(child(path, "node"), f"not a valid node name: {problem}")
    if not report.clean_since(start):
        return None
    return DeviceSelector(
        uuid=values.get("uuid"),
        inventory_id=values.get("inventoryID"),
        pci_address=values.get("pciAddress"),
        node=node,
    )


def _devices(raw: object, path: str, report: Report) -> tuple[DeviceSelector, ...] | None:
    if raw is MISSING:
        return ()
    if not isinstance(raw, list):
        report.add(path, f"must be a list, got {describe_value(raw)}")
        return None
    start = report.mark()
    accepted: list[DeviceSelector] = []
    earlier = _EarlierEntries()
    for index, entry in enumerate(raw):
        selector = _device(entry, item(path, index), report)
        if selector is None:
            continue
        overlapping = earlier.first_overlap(selector)
        if overlapping is not None:
            report.add(
                item(path, index),
                f"names the same card as {item(path, overlapping)} ({selector.describe()})",
            )
        earlier.add(index, selector)
        accepted.append(selector)
    if not report.clean_since(start):
        return None
    return tuple(accepted)


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class _Claims:
    """The earlier entries of one (key, value): the first of all, the first without ``node``, and
    the first per node."""

    first: int
    first_anywhere: int | None = None
    first_on: dict[str, int] = field(default_factory=dict)


class _EarlierEntries:
    """The entries of one ``devices`` list seen so far, indexed by card key.

    Answers "which earlier entry names the same card" (the rule of
    :func:`~hcs_deviceplugin.pools.conflicts.selectors_overlap`) in constant time, so a list of 20,000
    entries is checked in one pass instead of 200 million comparisons.
    """

    def __init__(self) -> None:
        self._claims: dict[tuple[str, str], _Claims] = {}

    def first_overlap(self, selector: DeviceSelector) -> int | None:
        """The index of the first earlier entry that overlaps ``selector``, or ``None``."""
        key = device_key(selector)
        claims = self._claims.get((key.kind, key.value)) if key is not None else None
        if key is None or claims is None:
            return None
        if key.node is None:
            return claims.first  # a node-less entry overlaps every entry of the card
        found = [i for i in (claims.first_anywhere, claims.first_on.get(key.node)) if i is not None]
        return min(found, default=None)

    def add(self, index: int, selector: DeviceSelector) -> None:
        key = device_key(selector)
        if key is None:
            return
        claims = self._claims.setdefault((key.kind, key.value), _Claims(index))
        if key.node is None:
            if claims.first_anywhere is None:
                claims.first_anywhere = index
        else:
            claims.first_on.setdefault(key.node, index)


@field_repr
@dataclass(frozen=True, repr=False)  # compared: a parse reuses the last one's pools only under equal prefixes
class _Prefixes:
    """The resource domains of the document, or ``None`` where the prefix is unusable."""

    node: str | None
    cluster: str | None


def _prefixes(document: Mapping[object, object], pools: list[object], report: Report) -> _Prefixes:
    raw = optional(document, "resourcePrefix")
    if raw is MISSING:
        base: str | None = DEFAULT_RESOURCE_PREFIX
    else:
        base = string(raw, "resourcePrefix", report)
    if base is None:
        return _Prefixes(None, None)
    node: str | None = base
    problem = validate_extended_resource_name(f"{base}/pool")
    if problem is not None:
        report.add("resourcePrefix", f"not usable as the domain of a resource name: {problem}")
        node = None
    cluster: str | None = CLUSTER_SCOPE_PREFIX + base
    uses_cluster = any(isinstance(p, Mapping) and p.get("scope") == SCOPE_CLUSTER for p in pools)
    if node is None:
        cluster = None
    elif uses_cluster and (problem := validate_extended_resource_name(f"{cluster}/pool")) is not None:
        report.add(
            "resourcePrefix", f"not usable for scope {SCOPE_CLUSTER!r} pools as {cluster!r}: {problem}"
        )
        cluster = None
    return _Prefixes(node, cluster)


def _pool_name(raw: Mapping[object, object], path: str, report: Report) -> str | None:
    value = optional(raw, "name")
    if value is MISSING:
        report.add(path, "required")
        return None
    name = string(value, path, report)
    if name is not None and (problem := validate_pool_name(name)) is not None:
        report.add(path, problem)
        return None
    return name


def _scope(raw: Mapping[object, object], path: str, report: Report) -> str:
    value = optional(raw, "scope")
    if value is MISSING:
        return SCOPE_NODE
    if isinstance(value, str) and value in SCOPES:
        return value
    report.add(path, f"must be one of {', '.join(SCOPES)}, got {describe_value(value)}")
    return SCOPE_NODE


def _unit(raw: Mapping[object, object], path: str, report: Report) -> UnitKind | None:
    value = optional(raw, "unit")
    if value is MISSING:
        return UnitKind.CARD
    unit = UNIT_ALIASES.get(value) if isinstance(value, str) else None
    if unit is None:
        report.add(
            path, f"must be Card or Partition (MIG is an alias of Partition), got {describe_value(value)}"
        )
    return unit


def _profile(raw: Mapping[object, object], unit: UnitKind | None, path: str, report: Report) -> str | None:
    """Required for partitions (it says which partition), refused for cards (it would be ignored)."""
    value = optional(raw, "profile")
    if unit is UnitKind.PARTITION:
        if value is MISSING:
            report.add(path, "required when unit is Partition")
            return None
        return string(value, path, report)
    if unit is UnitKind.CARD and value is not MISSING:
        report.add(path, "not allowed when unit is Card (a profile describes partitions)")
    return None


def _compatibility_name(raw: object, scope: str | None, path: str, report: Report) -> str | None:
    """A full resource name given by the pool (e.g. ``nvidia.com/gpu``), validated like kubelet does.

    It lets workloads written for a vendor's own plugin move over unchanged. It replaces
    ``<prefix>/<name>`` whole, so it cannot be combined with ``scope: cluster`` (whose only effect is
    the prefix).
    """
    value = string(raw, path, report)
    if value is None:
        return None
    if scope == SCOPE_CLUSTER:
        report.add(path, f"not allowed with scope {SCOPE_CLUSTER!r} (the full name already sets the domain)")
        return None
    problem = validate_extended_resource_name(value)
    if problem is not None:
        report.add(path, f"invalid resource name: {problem}")
        return None
    return value


def _pool(raw: object, path: str, prefixes: _Prefixes, source: str, report: Report) -> Pool | None:
    if not isinstance(raw, Mapping):
        report.add(path, f"must be a mapping, got {describe_value(raw)}")
        return None
    start = report.mark()
    check_keys(raw, POOL_KEYS, path, report)

    name = _pool_name(raw, child(path, "name"), report)
    scope = _scope(raw, child(path, "scope"), report)
    unit = _unit(raw, child(path, "unit"), report)

    slices: int | None = 1
    raw_slices = optional(raw, "slicesPerUnit")
    if raw_slices is not MISSING:
        slices = integer(
            raw_slices, child(path, "slicesPerUnit"), MIN_SLICES_PER_UNIT, MAX_SLICES_PER_UNIT, report
        )

    profile = _profile(raw, unit, child(path, "profile"), report)

    max_devices: int | None = None
    raw_max = optional(raw, "maxDevicesPerNode")
    if raw_max is not MISSING:
        max_devices = integer(raw_max, child(path, "maxDevicesPerNode"), 1, None, report)

    placement = "spread"
    raw_placement = optional(raw, "replicaPlacement")
    if raw_placement is not MISSING:
        if raw_placement in REPLICA_PLACEMENTS:
            placement = str(raw_placement)
        else:
            report.add(
                child(path, "replicaPlacement"),
                f"must be one of {', '.join(REPLICA_PLACEMENTS)}, got {describe_value(raw_placement)}",
            )

    sharing, memory = _sharing(raw, slices, path, report)
    if sharing and unit is UnitKind.PARTITION:
        report.add(child(path, "sharing"), f"{sharing} shares whole cards: it needs unit: Card")
    devices = _devices(optional(raw, "devices"), child(path, "devices"), report)

    delivery = DeviceDelivery.DEVICE_SPECS
    raw_delivery = optional(raw, "deviceDelivery")
    if raw_delivery is not MISSING:
        if isinstance(raw_delivery, str) and raw_delivery in DELIVERIES:
            delivery = DeviceDelivery(raw_delivery)
        else:
            report.add(
                child(path, "deviceDelivery"),
                f"must be one of {', '.join(DELIVERIES)}, got {describe_value(raw_delivery)}",
            )

    api = _api(raw, path, report)
    if api is PoolApi.DRA:
        for key, ok in (
            ("sharing", not sharing),
            ("deviceDelivery", raw_delivery is MISSING),
            ("slicesPerUnit", slices in (None, 1)),
        ):
            if not ok:
                report.add(child(path, key), "not for api: dra (a claim shares a device, CDI delivers it)")

    prefix = prefixes.cluster if scope == SCOPE_CLUSTER else prefixes.node
    resource_name = f"{prefix}/{name}"
    raw_resource = optional(raw, "resourceName")
    if raw_resource is not MISSING:
        resource_name = _compatibility_name(raw_resource, scope, child(path, "resourceName"), report) or ""
    elif name is not None and prefix is not None:
        problem = validate_extended_resource_name(resource_name)
        if problem is not None:
            report.add(child(path, "name"), f"resource name {resource_name!r} is invalid: {problem}")

    if not report.clean_since(start) or name is None or prefix is None or unit is None or slices is None:
        return None
    return Pool(
        name=name,
        resource_name=resource_name,
        unit=unit,
        slices_per_unit=slices,
        profile=profile,
        max_devices_per_node=max_devices,
        devices=devices or (),
        source=source,
        replica_placement=placement,
        device_delivery=delivery,
        sharing=sharing,
        memory_per_replica=memory,
        api=api,
    )


def _api(raw: Mapping[object, object], path: str, report: Report) -> PoolApi:
    """``api``: which front end serves the pool (default: the device plugin API)."""
    value = optional(raw, "api")
    if value is MISSING:
        return PoolApi.DEVICE_PLUGIN
    if isinstance(value, str) and value in {a.value for a in PoolApi}:
        return PoolApi(value)
    choices = ", ".join(a.value for a in PoolApi)
    report.add(child(path, "api"), f"must be one of {choices}, got {describe_value(value)}")
    return PoolApi.DEVICE_PLUGIN


def _sharing(
    raw: Mapping[object, object], slices: int | None, path: str, report: Report
) -> tuple[str, int | None]:
    """``sharing`` (``""`` for time-slicing) and ``memoryPerReplica`` in bytes, checked together.

    The core does not know the modes: a backend enforces one or the card is refused at apply time
    (README, "Sharing modes"). Any mode but time-slicing needs at least 2 replicas, and only such a
    mode can enforce ``memoryPerReplica``.
    """
    sharing = ""
    raw_sharing = optional(raw, "sharing")
    if raw_sharing is not MISSING:
        text = string(raw_sharing, child(path, "sharing"), report)
        if text is not None and text != DEFAULT_SHARING:
            if SHARING_RE.fullmatch(text):
                sharing = text
            else:
                report.add(
                    child(path, "sharing"),
                    f"must be {DEFAULT_SHARING} or a backend's sharing mode (e.g. mps), got {text!r}",
                )
    if sharing and slices is not None and slices < 2:
        report.add(child(path, "slicesPerUnit"), f"sharing {sharing} needs at least 2 replicas, got {slices}")
    memory: int | None = None
    raw_memory = optional(raw, "memoryPerReplica")
    if raw_memory is not MISSING:
        where = child(path, "memoryPerReplica")
        memory = parse_bytes(raw_memory) if isinstance(raw_memory, str) else None
        if isinstance(raw_memory, int) and not isinstance(raw_memory, bool):
            memory = raw_memory
        if memory is None or memory <= 0:
            report.add(
                where, f"must be a memory size such as 2Gi or 1536Mi, got {describe_value(raw_memory)}"
            )
            memory = None
        elif not sharing:
            report.add(where, "needs a sharing mode that enforces it (sharing: mps); time-slicing cannot")
    return sharing, memory


def parse_native_data(document: object, source: str) -> list[Pool]:
    """Validate an already-loaded native document; see :func:`parse_native`."""
    report = Report(source)
    if document is None:
        return []
    if not isinstance(document, Mapping):
        raise ConfigErrors(
            [
                ConfigError(
                    source,
                    DOCUMENT_PATH,
                    f"must be a mapping with version and pools, got {describe_value(document)}",
                )
            ]
        )
    check_keys(document, TOP_LEVEL_KEYS, "", report)

    raw_pools = optional(document, "pools")
    pools_list: list[object] = []
    if raw_pools is not MISSING:
        if isinstance(raw_pools, list):
            pools_list = raw_pools
        else:
            report.add("pools", f"must be a list, got {describe_value(raw_pools)}")

    raw_version = optional(document, "version")
    if raw_version is MISSING:
        if pools_list:
            report.add("version", f"required; must be {VERSION!r}")
    elif not (isinstance(raw_version, str) and raw_version == VERSION):
        report.add("version", f"must be {VERSION!r}, got {describe_value(raw_version)}")

    prefixes = _prefixes(document, pools_list, report)
    pools: list[Pool] = []
    first_index: dict[str, int] = {}
    resource_index: dict[str, int] = {}
    previous = LAST_PARSE.previous(source, prefixes)
    checked: dict[str, Pool] = {}
    for index, raw_pool in enumerate(pools_list):
        path = item("pools", index)
        key = entry_key(raw_pool)
        pool = previous.get(key)
        if pool is None:
            pool = _pool(raw_pool, path, prefixes, source, report)
        if pool is not None:
            checked[key] = pool
        name = raw_pool.get("name") if isinstance(raw_pool, Mapping) else None
        if isinstance(name, str) and name:
            if name in first_index:
                report.add(
                    child(path, "name"),
                    f"duplicate pool name {name!r} (first defined at {item('pools', first_index[name])})",
                )
                continue
            first_index[name] = index
        if pool is None:
            continue
        earlier = resource_index.setdefault(pool.resource_name, index)
        if earlier != index:
            report.add(
                child(path, "resourceName"),
                f"resource {pool.resource_name!r} is already served by {item('pools', earlier)}",
            )
            continue
        pools.append(pool)
    LAST_PARSE.remember(source, prefixes, checked)
    if report.errors:
        raise ConfigErrors(report.errors)
    return pools


def warn_no_pools(where: str) -> None:
    """Log that the native document ``where`` is valid but defines no pools (see the module docstring)."""
    log.warning(
        "%s defines no pools (empty document): it serves nothing, and pools it defined before are withdrawn",
        where,
        extra={"config_source": where},
    )


def parse_native(text: str, source: str, syntax: Syntax = "yaml") -> list[Pool]:
    """Parse a native pool document; the pools in document order, each with ``source`` set.

    Raises :class:`ConfigErrors` with every problem found, each with the field path. Cards listed in
    two pools are not an error here (use :func:`~hcs_deviceplugin.pools.conflicts.find_conflicts`).
    An entry written exactly as in the previous parse of ``source`` is not checked again: its pool
    is the one that parse built (:data:`LAST_PARSE`).
    """
    with collector_paused():  # the document and its pools are built, nothing is freed meanwhile
        return parse_native_data(load_document(text, source, syntax), source)
