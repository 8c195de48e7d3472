"""The node description that drives the simulated backend: YAML in, frozen values out.

The simulated backend stands in for real hardware, so its description is the only "driver" it has. A
description that parses loosely would let a typo (``numaNode`` for ``numa``) silently produce a node
without the property the user meant to test, which is exactly the confusion the style guide warns
about. So parsing is strict: unknown keys, wrong types and dangling references are errors that name
the field path (``cards[2].partitions[0].memoryMiB``). Reading is separate from parsing so that the
pure part can be tested with plain dicts.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from hcs_deviceplugin.backend import BackendAbsent
from hcs_deviceplugin.model import Health, HealthEvent, Link, LinkKind

MIB = 1024 * 1024

BUILTIN_PREFIX = "builtin:"
"""A node reference of the form ``builtin:<name>`` names a description shipped in this package."""

DEFAULT_NODE = "default"

_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class NodeDescriptionError(ValueError):
    """A node description that is well-formed YAML but not a valid node; ``field`` is the path."""

    def __init__(self, field_path: str, problem: str) -> None:
        super().__init__(f"{field_path or '<document>'}: {problem}")
        self.field = field_path
        self.problem = problem


@dataclass(frozen=True)
class PartitionSpec:
    """A partition as the description (or a later ``partition()`` call) defines it."""

    id: str
    profile: str
    memory_mib: int = 0


@dataclass(frozen=True)
class ProfileSpec:
    """A partition profile a card offers: at most ``max_count`` of it, each ``memory_mib`` (0: unknown)."""

    name: str
    max_count: int
    memory_mib: int = 0


@dataclass(frozen=True)
class CardSpec:
    """One simulated card; ``vendor`` is only a label, nothing branches on it."""

    id: str
    vendor: str
    model: str
    index: int
    pci_address: str = ""
    pci_vendor_id: int = 0
    pci_device_id: int = 0
    numa_node: int | None = None
    memory_mib: int = 0
    partitions: tuple[PartitionSpec, ...] = ()
    profiles: Mapping[str, ProfileSpec] = field(default_factory=lambda: MappingProxyType({}))
    attributes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", MappingProxyType(dict(self.profiles)))
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))


@dataclass(frozen=True)
class LinkSpec:
    """A link between cards ``a`` and ``b`` (order does not matter)."""

    a: str
    b: str
    link: Link


@dataclass(frozen=True)
class ScriptedEvent:
    """A health event the backend emits ``after`` seconds after it starts."""

    after: float
    event: HealthEvent


@dataclass(frozen=True)
class NodeDescription:
    """A whole simulated node. ``source`` says where it was read from, for messages."""

    cards: tuple[CardSpec, ...] = ()
    links: tuple[LinkSpec, ...] = ()
    events: tuple[ScriptedEvent, ...] = ()
    node: str | None = None
    source: str = "<memory>"

    def device_ids(self) -> set[str]:
        """Every id a health event may name: cards and their described partitions."""
        ids = {c.id for c in self.cards}
        ids.update(p.id for c in self.cards for p in c.partitions)
        return ids


# ---------------------------------------------------------------------------------------------- reading


def load_node_description(path: str | Path) -> NodeDescription:
    """Read and parse a description file, or a ``builtin:<name>`` one shipped with the package.

    Anything that stops the file from being a node (missing, unreadable, bad YAML, invalid content)
    raises :class:`BackendAbsent`: to the daemon, a simulated node it cannot read is a node without
    that hardware, and the message says which file and why.
    """
    text_path = str(path)
    if text_path.startswith(BUILTIN_PREFIX):
        name = text_path[len(BUILTIN_PREFIX) :]
        return load_builtin_node(name)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendAbsent(f"simulated node description {text_path}: cannot read: {exc}") from exc
    return parse_node_text(text, text_path)


def builtin_node_names() -> list[str]:
    """Names accepted by ``builtin:<name>``: ``default`` and every example under ``nodes/``."""
    examples = resources.files("vendors.simulated.nodes")
    names = [p.name.removesuffix(".yaml") for p in examples.iterdir() if p.name.endswith(".yaml")]
    return [DEFAULT_NODE, *sorted(names)]


def load_builtin_node(name: str) -> NodeDescription:
    """A description shipped in the package, read through importlib.resources so wheels work too."""
    if name == DEFAULT_NODE:
        resource = resources.files("vendors.simulated").joinpath("default_node.yaml")
    else:
        resource = resources.files("vendors.simulated.nodes").joinpath(f"{name}.yaml")
    if not resource.is_file():
        raise BackendAbsent(
            f"simulated node description {BUILTIN_PREFIX}{name}: no such built-in node "
            f"(known: {', '.join(builtin_node_names())})"
        )
    return parse_node_text(resource.read_text(encoding="utf-8"), f"{BUILTIN_PREFIX}{name}")


def parse_node_text(text: str, source: str) -> NodeDescription:
    """Parse YAML text; every failure becomes :class:`BackendAbsent` naming ``source``."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise BackendAbsent(f"simulated node description {source}: invalid YAML: {exc}") from exc
    try:
        return parse_node_description(data, source)
    except NodeDescriptionError as exc:
        raise BackendAbsent(f"simulated node description {source}: {exc}") from exc


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which plain PyYAML silently resolves to the last one.

    Merge keys (``<<: *h100``) stay allowed, with explicit keys overriding merged ones, because a
    node of eight identical cards is naturally written with an anchor.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys with a proper mark
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# ---------------------------------------------------------------------------------------------- parsing

_TOP_KEYS = frozenset({"node", "cards", "links", "events"})
_CARD_KEYS = frozenset(
    {
        "id",
        "vendor",
        "model",
        "index",
        "pciAddress",
        "pciVendorId",
        "pciDeviceId",
        "numa",
        "memoryMiB",
        "partitions",
        "partitionProfiles",
        "attributes",
    }
)
_PARTITION_KEYS = frozenset({"id", "profile", "memoryMiB"})
_PROFILE_KEYS = frozenset({"max", "memoryMiB"})
_LINK_KEYS = frozenset({"a", "b", "kind", "count", "bandwidthGbps"})
_EVENT_KEYS = frozenset({"after", "device", "health", "reason"})


def parse_node_description(data: object, source: str = "<memory>") -> NodeDescription:
    """Turn the loaded YAML document into a :class:`NodeDescription`; pure, raises NodeDescriptionError."""
    if data is None:
        raise NodeDescriptionError("", "the document is empty; a node needs at least 'cards'")
    top = _mapping(data, "", _TOP_KEYS)
    node = _opt_str(top, "node", "")
    cards = tuple(
        _parse_card(item, f"cards[{i}]", i) for i, item in enumerate(_list(top, "cards", "", required=True))
    )
    _check_unique_cards(cards)
    card_ids = {c.id for c in cards}
    links = tuple(
        _parse_link(item, f"links[{i}]", card_ids) for i, item in enumerate(_list(top, "links", ""))
    )
    _check_unique_links(links)
    device_ids = {c.id for c in cards} | {p.id for c in cards for p in c.partitions}
    events = tuple(
        _parse_event(item, f"events[{i}]", device_ids) for i, item in enumerate(_list(top, "events", ""))
    )
    return NodeDescription(
        cards=cards,
        links=links,
        events=tuple(sorted(events, key=lambda e: e.after)),
        node=node or None,
        source=source,
    )


def _parse_card(value: object, path: str, position: int) -> CardSpec:
    m = _mapping(value, path, _CARD_KEYS)
    card_id = _req_str(m, "id", path)
    pci_address = _opt_str(m, "pciAddress", path, hint="quote it: YAML reads 0000:17:00.0 as a number")
    if pci_address:
        pci_address = pci_address.lower()
        if not _PCI_ADDRESS.match(pci_address):
            raise NodeDescriptionError(
                _join(path, "pciAddress"), f"{pci_address!r} is not a PCI address like '0000:17:00.0'"
            )
    profiles = _parse_profiles(m.get("partitionProfiles"), _join(path, "partitionProfiles"))
    partitions = tuple(
        _parse_partition(item, f"{path}.partitions[{i}]", profiles)
        for i, item in enumerate(_list(m, "partitions", path))
    )
    _check_profile_counts(partitions, profiles, path)
    return CardSpec(
        id=card_id,
        vendor=_req_str(m, "vendor", path),
        model=_req_str(m, "model", path),
        index=_int(m, "index", path, default=position),
        pci_address=pci_address,
        pci_vendor_id=_int(m, "pciVendorId", path, default=0, maximum=0xFFFF),
        pci_device_id=_int(m, "pciDeviceId", path, default=0, maximum=0xFFFF),
        numa_node=_opt_int(m, "numa", path),
        memory_mib=_int(m, "memoryMiB", path, default=0),
        partitions=partitions,
        profiles=profiles,
        attributes=_str_map(m.get("attributes"), _join(path, "attributes")),
    )


def _parse_profiles(value: object, path: str) -> dict[str, ProfileSpec]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NodeDescriptionError(path, f"expected a mapping of profile to max count, got {_kind(value)}")
    profiles: dict[str, ProfileSpec] = {}
    for name, spec in value.items():
        entry = f'{path}["{name}"]'
        if not isinstance(name, str) or not name:
            raise NodeDescriptionError(entry, "a profile name must be a non-empty string")
        if isinstance(spec, dict):
            m = _mapping(spec, entry, _PROFILE_KEYS)
            if "max" not in m:
                raise NodeDescriptionError(_join(entry, "max"), "required field is missing")
            profiles[name] = ProfileSpec(
                name, _int(m, "max", entry, default=0, minimum=1), _int(m, "memoryMiB", entry, default=0)
            )
        else:
            profiles[name] = ProfileSpec(name, _as_int(spec, entry, minimum=1))
    return profiles


def _parse_partition(value: object, path: str, profiles: Mapping[str, ProfileSpec]) -> PartitionSpec:
    m = _mapping(value, path, _PARTITION_KEYS)
    profile = _req_str(m, "profile", path)
    if profiles and profile not in profiles:
        raise NodeDescriptionError(
            _join(path, "profile"),
            f"{profile!r} is not in the card's partitionProfiles ({', '.join(profiles)})",
        )
    default_memory = profiles[profile].memory_mib if profile in profiles else 0
    return PartitionSpec(
        id=_req_str(m, "id", path),
        profile=profile,
        memory_mib=_int(m, "memoryMiB", path, default=default_memory),
    )


def _check_profile_counts(
    partitions: Sequence[PartitionSpec], profiles: Mapping[str, ProfileSpec], path: str
) -> None:
    for name, spec in profiles.items():
        used = sum(1 for p in partitions if p.profile == name)
        if used > spec.max_count:
            raise NodeDescriptionError(
                _join(path, "partitions"),
                f"{used} partitions of {name!r} but the profile allows {spec.max_count}",
            )


def _check_unique_cards(cards: Sequence[CardSpec]) -> None:
    """Card and partition ids share one namespace (health events name either), indices and PCI too."""
    seen_ids: dict[str, str] = {}
    seen_index: dict[int, str] = {}
    seen_pci: dict[str, str] = {}
    for i, card in enumerate(cards):
        path = f"cards[{i}]"
        named = [(_join(path, "id"), card.id)]
        named += [(f"{path}.partitions[{j}].id", p.id) for j, p in enumerate(card.partitions)]
        for where, dev_id in named:
            if dev_id in seen_ids:
                raise NodeDescriptionError(where, f"duplicate id {dev_id!r} (also at {seen_ids[dev_id]})")
            seen_ids[dev_id] = where
        if card.index in seen_index:
            raise NodeDescriptionError(
                _join(path, "index"), f"duplicate index {card.index} (also card {seen_index[card.index]!r})"
            )
        seen_index[card.index] = card.id
        if card.pci_address:
            if card.pci_address in seen_pci:
                raise NodeDescriptionError(
                    _join(path, "pciAddress"),
                    f"duplicate PCI address {card.pci_address} (also card {seen_pci[card.pci_address]!r})",
                )
            seen_pci[card.pci_address] = card.id


def _parse_link(value: object, path: str, card_ids: set[str]) -> LinkSpec:
    m = _mapping(value, path, _LINK_KEYS)
    a = _req_str(m, "a", path)
    b = _req_str(m, "b", path)
    for key, card_id in (("a", a), ("b", b)):
        if card_id not in card_ids:
            raise NodeDescriptionError(_join(path, key), f"no card with id {card_id!r}")
    if a == b:
        raise NodeDescriptionError(path, f"a link needs two different cards, both ends are {a!r}")
    kind_text = _req_str(m, "kind", path)
    try:
        kind = LinkKind(kind_text)
    except ValueError:
        known = ", ".join(k.value for k in LinkKind)
        raise NodeDescriptionError(
            _join(path, "kind"), f"unknown link kind {kind_text!r} (known: {known})"
        ) from None
    link = Link(
        kind=kind,
        count=_int(m, "count", path, default=1, minimum=1),
        bandwidth_gbps=_number(m, "bandwidthGbps", path, default=0.0),
    )
    return LinkSpec(a=a, b=b, link=link)


def _check_unique_links(links: Sequence[LinkSpec]) -> None:
    seen: set[tuple[frozenset[str], LinkKind]] = set()
    for i, spec in enumerate(links):
        key = (frozenset((spec.a, spec.b)), spec.link.kind)
        if key in seen:
            raise NodeDescriptionError(
                f"links[{i}]", f"{spec.link.kind.value} between {spec.a!r} and {spec.b!r} is listed twice"
            )
        seen.add(key)


def _parse_event(value: object, path: str, device_ids: set[str]) -> ScriptedEvent:
    m = _mapping(value, path, _EVENT_KEYS)
    if "after" not in m:
        raise NodeDescriptionError(_join(path, "after"), "required field is missing")
    device = _req_str(m, "device", path)
    if device not in device_ids:
        raise NodeDescriptionError(_join(path, "device"), f"no card or partition with id {device!r}")
    health_text = _req_str(m, "health", path)
    try:
        health = Health(health_text)
    except ValueError:
        known = ", ".join(h.value for h in Health)
        raise NodeDescriptionError(
            _join(path, "health"), f"unknown health {health_text!r} (known: {known})"
        ) from None
    return ScriptedEvent(
        after=_number(m, "after", path, default=0.0),
        event=HealthEvent(device_id=device, health=health, reason=_opt_str(m, "reason", path)),
    )


# ---------------------------------------------------------------------------------------------- helpers


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: object, path: str, allowed: frozenset[str]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise NodeDescriptionError(path, f"expected a mapping, got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise NodeDescriptionError(path, f"keys must be strings, got {key!r}")
        if key not in allowed:
            raise NodeDescriptionError(
                _join(path, key), f"unknown field (allowed here: {', '.join(sorted(allowed))})"
            )
    return value


def _list(m: Mapping[str, object], key: str, path: str, required: bool = False) -> list[object]:
    if key not in m:
        if required:
            raise NodeDescriptionError(_join(path, key), "required field is missing")
        return []
    value = m[key]
    if value is None:
        return []
    if not isinstance(value, list):
        raise NodeDescriptionError(_join(path, key), f"expected a list, got {_kind(value)}")
    return value


def _req_str(m: Mapping[str, object], key: str, path: str) -> str:
    if key not in m:
        raise NodeDescriptionError(_join(path, key), "required field is missing")
    value = _opt_str(m, key, path)
    if not value:
        raise NodeDescriptionError(_join(path, key), "must not be empty")
    return value


def _opt_str(m: Mapping[str, object], key: str, path: str, hint: str = "") -> str:
    value = m.get(key, "")
    if not isinstance(value, str):
        extra = f"; {hint}" if hint else ""
        raise NodeDescriptionError(_join(path, key), f"expected a string, got {_kind(value)}{extra}")
    return value


def _str_map(value: object, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NodeDescriptionError(path, f"expected a mapping of strings, got {_kind(value)}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise NodeDescriptionError(f"{path}.{k}", f"keys and values must be strings, got {_kind(v)}")
    return dict(value)


def _as_int(value: object, path: str, minimum: int = 0, maximum: int | None = None) -> int:
    # bool is an int subclass; ``memoryMiB: yes`` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise NodeDescriptionError(path, f"expected an integer, got {_kind(value)}")
    if value < minimum:
        raise NodeDescriptionError(path, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise NodeDescriptionError(path, f"must be at most {maximum:#x}, got {value:#x}")
    return value


def _int(
    m: Mapping[str, object], key: str, path: str, default: int, minimum: int = 0, maximum: int | None = None
) -> int:
    if key not in m:
        return default
    return _as_int(m[key], _join(path, key), minimum=minimum, maximum=maximum)


def _opt_int(m: Mapping[str, object], key: str, path: str) -> int | None:
    value = m.get(key)
    return None if value is None else _as_int(value, _join(path, key))


def _number(m: Mapping[str, object], key: str, path: str, default: float) -> float:
    value = m.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NodeDescriptionError(_join(path, key), f"expected a number, got {_kind(value)}")
    if value < 0:
        raise NodeDescriptionError(_join(path, key), f"must not be negative, got {value}")
    return float(value)
