"""The DKP per-pool format (POOLS.md §2): one NVIDIA device plugin config per pool.

The GPU control plane writes, for each pool, a ConfigMap ``nvidia-device-plugin-<pool>-config``
(labels ``app=nvidia-device-plugin``, ``pool=<pool>``) whose key ``config.yaml`` is a config for
NVIDIA's k8s-device-plugin (``version: v1``), meant for one upstream plugin DaemonSet per pool. We
serve every such pool from one process, so the config is read the way the upstream plugin reads it,
field by field, and turned into our ``Pool``:

=============================================  ========================================================
``resources.gpus[].pattern``                   a :class:`DeviceSelector` ``pattern``: ``*`` is the only
                                               wildcard, the rest literal, matched as a substring of the
                                               card id (:func:`~hcs_deviceplugin.model.pattern_matches`)
``resources.gpus[].name``                      the pool name: the last ``/`` segment, trimmed
``flags.resourcePrefix``                       the resource domain; env ``NVIDIA_RESOURCE_PREFIX`` wins
``sharing.timeSlicing.resources[].replicas``   ``slicesPerUnit`` of the pool its ``name`` names
``sharing.mps.resources[].replicas``           the same, and the pool's ``sharing`` is ``mps``
``flags.migStrategy``                          option ``migStrategy``
``[flags.]plugin.deviceListStrategy`` etc.     options ``deviceListStrategy``, ``deviceIDStrategy``,
                                               ``passDeviceSpecs``, ``cdiAnnotationPrefix``
``deviceListStrategy`` ``cdi-cri``,            the pool's ``deviceDelivery`` (our own CDI spec; the
``cdi-annotations``                            backend keeps ``envvar``, see pools/delivery.py)
=============================================  ========================================================

Choices where POOLS.md and upstream are silent or do not fit one process serving many pools:

* **Strict keys.** Every key upstream's ``api/config/v1`` knows is accepted (lists below); anything
  else is an error with its path, so a typo cannot silently change what is advertised. Known keys we
  have no use for (``imex``, ``flags.gfd``, driver roots, ``failOnInitError`` …) are accepted
  without effect. Non-empty ``resources.mig(s)`` is refused because ignoring it would advertise
  something else than the config says (MIG pools are native ``unit: Partition`` pools).
* **Patterns.** An empty pattern is an error (upstream reads it as "every card", which in practice
  means a template rendered an empty UUID). ``^<id>$`` — written by older renderings and never
  matching upstream — is read as an exact match of ``<id>`` with a warning that says so; any other
  pattern containing ``^`` or ``$`` (except the ``^$`` placeholder) gets a warning that it matches
  nothing. Repeated patterns are merged.
* **Names.** ``team-a`` and ``gpu.deckhouse.io/team-a`` both name pool ``team-a``. The resource
  domain is ``NVIDIA_RESOURCE_PREFIX``, else ``flags.resourcePrefix``, else the domain a qualified
  name carries, else ``gpu.deckhouse.io``; a qualified name whose domain differs from an explicit
  prefix is warned about (the prefix wins). Several names in one config give several pools.
* **Sharing.** ``sharing`` or its older spelling ``shared`` (not both), read by :func:`read_sharing`,
  which the NodeGroup format shares: ``timeSlicing`` or ``mps``, not both (upstream refuses both).
  ``mps`` takes ``renameByDefault``, ``failRequestsGreaterThanOne`` and ``resources``; an MPS pool
  always refuses a request for more than one replica (upstream forces ``failRequestsGreaterThanOne``
  there, so ``false`` is warned about and ignored), and needs 2 replicas
  or more. A ``replicas`` entry names the resource it applies to as upstream matches it (bare or
  qualified, last segment); naming a resource that ``resources.gpus`` does not define, or one
  resource twice, is an error. Time-slicing replicas are 1..64 (1 = exclusive; upstream wants ≥ 2,
  renderers write 1 for "not shared"); a pool the section does not name stays exclusive.
  ``renameByDefault: true`` advertises a shared pool as ``<resource>.shared``, as upstream does;
  ``rename`` and ``devices`` are ignored with a warning, as upstream overrides them.
* **MIG strategy** is passed to the backend (option ``migStrategy``); the pool stays a ``Card`` pool,
  because this format does not say a pool is a MIG pool, nor which profile it serves.
* **Plugin options** may sit under ``flags.plugin`` (upstream) or top-level ``plugin`` (what the
  renderer writes, which upstream itself ignores); both are read, and the same key set to different
  values in both is an error. Types are upstream's: ``passDeviceSpecs`` is a YAML boolean,
  ``deviceListStrategy`` a string or a list of strings.
* ``version`` may be omitted (upstream defaults it to ``v1``); any other value is an error.
* A card that matches no pool is not ours: never an error (upstream fails on such a GPU).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hcs_deviceplugin.model import DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools.delivery import delivery_from_strategies
from hcs_deviceplugin.pools.document import load_document
from hcs_deviceplugin.pools.errors import DOCUMENT_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.fields import (
    MISSING,
    Report,
    boolean,
    check_keys,
    child,
    describe_value,
    integer,
    item,
    mapping,
    one_of,
    optional,
    sequence,
    string,
)
from hcs_deviceplugin.pools.located import LocatedPool, in_key, key_path
from hcs_deviceplugin.pools.names import validate_extended_resource_name, validate_pool_name
from hcs_deviceplugin.pools.native import DEFAULT_RESOURCE_PREFIX, MAX_SLICES_PER_UNIT, MIN_SLICES_PER_UNIT
from hcs_deviceplugin.pools.objects import ConfigMapObject

log = logging.getLogger(__name__)

CONFIG_KEY = "config.yaml"
RESOURCE_PREFIX_ENV = "NVIDIA_RESOURCE_PREFIX"
VERSION = "v1"
SHARED_SUFFIX = ".shared"

MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")

# Upstream's api/config/v1 keys (plus DKP's flags.resourcePrefix and top-level plugin / shared).
TOP_LEVEL_KEYS = ("version", "flags", "resources", "sharing", "shared", "plugin", "imex")
FLAGS_KEYS = (
    *("migStrategy", "failOnInitError", "restartOnDeviceUnhealthy", "mpsRoot", "nvidiaDriverRoot"),
    *("nvidiaDevRoot", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI"),
    *("deviceDiscoveryStrategy", "plugin", "gfd", "resourcePrefix"),
)
PLUGIN_KEYS = (
    *("passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix"),
    *("nvidiaCTKPath", "containerDriverRoot", "kubeletSocket", "cdiFeatureFlags"),
)
GFD_KEYS = ("oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile")
IMEX_KEYS = ("channelIDs", "required")
RESOURCES_KEYS = ("gpus", "mig", "migs")
GPU_KEYS = ("pattern", "name")
SHARING_KEYS = ("timeSlicing", "mps")
TIME_SLICING_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources", "strategy")
MPS_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
REPLICATED_KEYS = ("name", "rename", "devices", "replicas")

_LEGACY_ANCHORED = re.compile(r"\^(?P<id>[^*^$]+)\$")

Warn = Callable[[str, str], None]


def parse_dkp_plugin_config(obj: ConfigMapObject, env: Mapping[str, str] | None = None) -> list[Pool]:
    """The pools of one DKP per-pool ConfigMap; raises :class:`ConfigErrors` with every problem.

    ``env`` (default ``os.environ``) supplies ``NVIDIA_RESOURCE_PREFIX``. Warnings (legacy patterns,
    ignored fields) are logged, each naming the object and the field.
    """
    return [located.pool for located in parse_dkp_located(obj, env)]


def parse_dkp_located(obj: ConfigMapObject, env: Mapping[str, str] | None = None) -> list[LocatedPool]:
    """:func:`parse_dkp_plugin_config`, with the field path of each pool's name."""
    environ = os.environ if env is None else env
    only = f"unexpected key; a DKP per-pool ConfigMap holds only {CONFIG_KEY}"
    extra = sorted(key for key in obj.data if key != CONFIG_KEY)
    errors = [ConfigError(obj.source, key_path(obj, key), only) for key in extra]
    text = obj.data.get(CONFIG_KEY)
    if text is None:
        missing = f"needs the key {CONFIG_KEY} (the NVIDIA plugin config)"
        raise ConfigErrors([ConfigError(obj.source, "data", missing), *errors])
    try:
        document = load_document(text, obj.source)
    except ConfigErrors as exc:
        raise ConfigErrors(errors + in_key(exc.errors, obj, CONFIG_KEY)) from exc

    warn = warner(obj, CONFIG_KEY)
    report = Report(obj.source)
    pools = _document(document, obj.source, environ, report, warn)
    errors += in_key(report.errors, obj, CONFIG_KEY)
    if errors:
        raise ConfigErrors(errors)
    return [LocatedPool(p.pool, key_path(obj, CONFIG_KEY, p.path)) for p in pools]


@dataclass
class _Entry:
    """The ``resources.gpus`` entries that name one pool, merged."""

    path: str
    domain: str | None
    selectors: list[DeviceSelector] = field(default_factory=list)
    seen: set[DeviceSelector] = field(default_factory=set)
    """The selectors as a set: merging repeats stays linear in the number of entries."""


def _document(
    document: object, source: str, env: Mapping[str, str], report: Report, warn: Warn
) -> list[LocatedPool]:
    if document is None:
        report.add(DOCUMENT_PATH, "empty; needs resources.gpus (which cards, under which name)")
        return []
    root = mapping(document, DOCUMENT_PATH, report, "a mapping (an NVIDIA device plugin config)")
    if root is None:
        return []
    check_keys(root, TOP_LEVEL_KEYS, "", report)
    version = optional(root, "version")
    if version is not MISSING and version != VERSION:
        report.add("version", f"must be {VERSION!r}, got {describe_value(version)}")
    imex = optional(root, "imex")
    if imex is not MISSING and (imex_map := mapping(imex, "imex", report)) is not None:
        check_keys(imex_map, IMEX_KEYS, "imex", report)

    flags = _flags(root, report)
    delivery, options = delivery_from_strategies(_plugin_options(root, flags, report))
    explicit_prefix = _explicit_prefix(flags, env, report)
    entries = _gpus(root, report, warn)
    sharing = read_sharing(root, report, warn, set(entries))

    pools: list[LocatedPool] = []
    for name, entry in entries.items():
        prefix = explicit_prefix or entry.domain or DEFAULT_RESOURCE_PREFIX
        if explicit_prefix and entry.domain and entry.domain != explicit_prefix:
            warn(
                child(entry.path, "name"),
                f"names domain {entry.domain!r}, but resources are advertised under {explicit_prefix!r} "
                f"(flags.resourcePrefix or {RESOURCE_PREFIX_ENV}); the name's domain is ignored",
            )
        slices = sharing.replicas.get(name, 1)
        if sharing.pool_sharing(name) and not check_mps_replicas(name, slices, report):
            continue
        resource_name = f"{prefix}/{name}" + (SHARED_SUFFIX if sharing.rename and slices > 1 else "")
        problem = validate_extended_resource_name(resource_name)
        if problem is not None:
            report.add(child(entry.path, "name"), f"resource name {resource_name!r} is invalid: {problem}")
            continue
        pool = Pool(
            name=name,
            resource_name=resource_name,
            unit=UnitKind.CARD,
            slices_per_unit=slices,
            devices=tuple(entry.selectors),
            source=source,
            options=options,
            sharing=sharing.pool_sharing(name),
            device_delivery=delivery,
        )
        pools.append(LocatedPool(pool, child(entry.path, "name")))
    return pools


def _section(parent: Mapping[object, object], key: str, path: str, report: Report) -> Mapping[object, object]:
    """An optional mapping-valued key; absent, null or wrong-typed (reported) reads as empty."""
    raw = optional(parent, key)
    if raw is MISSING:
        return {}
    return mapping(raw, path, report) or {}


def _flags(root: Mapping[object, object], report: Report) -> Mapping[object, object]:
    flags = _section(root, "flags", "flags", report)
    check_keys(flags, FLAGS_KEYS, "flags", report)
    check_keys(_section(flags, "gfd", "flags.gfd", report), GFD_KEYS, "flags.gfd", report)
    return flags


def _plugin_options(
    root: Mapping[object, object], flags: Mapping[object, object], report: Report
) -> dict[str, str]:
    """Backend options from ``flags.migStrategy`` and both plugin sections, checked as upstream does."""
    options: dict[str, str] = {}
    mig = optional(flags, "migStrategy")
    if mig is not MISSING and (value := one_of(mig, MIG_STRATEGIES, "flags.migStrategy", report)) is not None:
        options["migStrategy"] = value
    found: dict[str, tuple[str, str]] = {}
    for path, parent, key in (("flags.plugin", flags, "plugin"), ("plugin", root, "plugin")):
        section = _section(parent, key, path, report)
        check_keys(section, PLUGIN_KEYS, path, report)
        for name, value in _plugin_section(section, path, report).items():
            earlier = found.get(name)
            if earlier is not None and earlier[1] != value:
                report.add(
                    child(path, name),
                    f"{value!r} conflicts with {earlier[0]}.{name} {earlier[1]!r}; set it in one place",
                )
                continue
            found[name] = (path, value)
    options.update({name: value for name, (_, value) in found.items()})
    return options


def _plugin_section(section: Mapping[object, object], path: str, report: Report) -> dict[str, str]:
    values: dict[str, str] = {}
    raw = optional(section, "passDeviceSpecs")
    if raw is not MISSING and (flag := boolean(raw, child(path, "passDeviceSpecs"), report)) is not None:
        values["passDeviceSpecs"] = "true" if flag else "false"
    raw = optional(section, "deviceListStrategy")
    if raw is not MISSING and (strategies := _list_strategy(raw, child(path, "deviceListStrategy"), report)):
        values["deviceListStrategy"] = ",".join(strategies)
    raw = optional(section, "deviceIDStrategy")
    if raw is not MISSING and (
        id_strategy := one_of(raw, DEVICE_ID_STRATEGIES, child(path, "deviceIDStrategy"), report)
    ):
        values["deviceIDStrategy"] = id_strategy
    raw = optional(section, "cdiAnnotationPrefix")
    if raw is not MISSING and (prefix := string(raw, child(path, "cdiAnnotationPrefix"), report)):
        values["cdiAnnotationPrefix"] = prefix
    return values


def _list_strategy(raw: object, path: str, report: Report) -> list[str] | None:
    """A strategy or a list of them (upstream's ``deviceListStrategyFlag``), each a known one."""
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        report.add(path, f"must be a strategy or a non-empty list of them, got {describe_value(raw)}")
        return None
    start = report.mark()
    chosen: list[str] = []
    for index, value in enumerate(items):
        where = path if isinstance(raw, str) else item(path, index)
        if (strategy := one_of(value, DEVICE_LIST_STRATEGIES, where, report)) and strategy not in chosen:
            chosen.append(strategy)
    return chosen if report.clean_since(start) else None


def _explicit_prefix(flags: Mapping[object, object], env: Mapping[str, str], report: Report) -> str | None:
    """The resource domain set by env or ``flags.resourcePrefix``; ``None`` when neither sets one."""
    raw = optional(flags, "resourcePrefix")
    configured = None if raw is MISSING else string(raw, "flags.resourcePrefix", report)
    override = env.get(RESOURCE_PREFIX_ENV, "").strip()
    prefix = override or configured
    if prefix is None:
        return None
    problem = validate_extended_resource_name(f"{prefix}/pool")
    if problem is not None:
        where = f"{RESOURCE_PREFIX_ENV}={override!r} (which overrides it)" if override else "it"
        report.add("flags.resourcePrefix", f"{where} is not usable as a resource name's domain: {problem}")
        return None
    return prefix


def _gpus(root: Mapping[object, object], report: Report, warn: Warn) -> dict[str, _Entry]:
    resources = _section(root, "resources", "resources", report)
    check_keys(resources, RESOURCES_KEYS, "resources", report)
    for key in ("mig", "migs"):
        raw = optional(resources, key)
        if raw is not MISSING and raw != []:
            report.add(
                child("resources", key),
                "MIG resources are not supported in this format; serve MIG devices from a native pool "
                "with unit: Partition and a profile",
            )
    raw_gpus = optional(resources, "gpus")
    if raw_gpus is MISSING:
        report.add("resources.gpus", "required: it says which cards the pool has and what it is called")
        return {}
    gpus = sequence(raw_gpus, "resources.gpus", report)
    if gpus is None:
        return {}
    if not gpus:
        report.add("resources.gpus", "must not be empty: it says which cards the pool has and its name")
    entries: dict[str, _Entry] = {}
    for index, raw in enumerate(gpus):
        path = item("resources.gpus", index)
        entry = mapping(raw, path, report, "a mapping with pattern and name")
        if entry is None:
            continue
        check_keys(entry, GPU_KEYS, path, report)
        selector = _pattern(entry, child(path, "pattern"), report, warn)
        named = _name(entry, child(path, "name"), report)
        if selector is None or named is None:
            continue
        name, domain = named
        merged = entries.setdefault(name, _Entry(path, domain))
        if selector not in merged.seen:
            merged.seen.add(selector)
            merged.selectors.append(selector)
    return entries


def _pattern(entry: Mapping[object, object], path: str, report: Report, warn: Warn) -> DeviceSelector | None:
    raw = optional(entry, "pattern")
    if raw is MISSING:
        report.add(path, "required: the card ids (GPU UUIDs) of the pool; '^$' for none")
        return None
    if raw == "":
        report.add(path, "must not be empty (upstream reads it as every card); write '*' for every card")
        return None
    pattern = string(raw, path, report)
    if pattern is None:
        return None
    legacy = _LEGACY_ANCHORED.fullmatch(pattern)
    if legacy is not None:
        warn(
            path,
            f"legacy anchored pattern {pattern!r}: upstream reads '^' and '$' literally, so it never "
            f"matched; read as an exact match of {legacy['id']!r}",
        )
        return DeviceSelector(uuid=legacy["id"])
    if pattern != "^$" and ("^" in pattern or "$" in pattern):
        warn(path, f"pattern {pattern!r}: '^' and '$' are literal characters here, so it matches no card")
    return DeviceSelector(pattern=pattern)


def _name(entry: Mapping[object, object], path: str, report: Report) -> tuple[str, str | None] | None:
    """(pool name, domain of a qualified name or None)."""
    raw = optional(entry, "name")
    if raw is MISSING:
        report.add(path, "required: the pool's name, bare (team-a) or qualified (gpu.deckhouse.io/team-a)")
        return None
    text = string(raw, path, report)
    if text is None:
        return None
    domain, _, last = text.strip().rpartition("/")
    name = last.strip()
    problem = validate_pool_name(name)
    if problem is not None:
        report.add(path, f"pool name {name!r} (the last segment of {text!r}): {problem}")
        return None
    return name, domain.strip() or None


@dataclass(frozen=True)
class Sharing:
    """What a config's ``sharing`` says: replicas by resource name (the last ``/`` segment), the mode
    (``timeSlicing``, ``mps``, or None without one) and whether shared resources get ``.shared``."""

    replicas: Mapping[str, int] = field(default_factory=dict)
    mode: str | None = None
    rename: bool = False

    def pool_sharing(self, resource: str) -> str:
        """:attr:`Pool.sharing` of ``resource``: ``mps`` when MPS replicates it, else empty (time-slicing
        and exclusive cards need nothing from the backend)."""
        return "mps" if self.mode == "mps" and resource in self.replicas else ""


def check_mps_replicas(resource: str, slices: int, report: Report) -> bool:
    """An MPS-shared resource needs 2 replicas or more (one MPS client owning a whole card is an
    exclusive card with a daemon in the way); False after reporting when it has fewer."""
    if slices < 2:
        report.add("sharing.mps", f"MPS needs at least 2 replicas of {resource!r}, got {slices}")
        return False
    return True


def warner(obj: ConfigMapObject, key: str) -> Warn:
    """Logs a warning about ``path`` inside the config under ``key`` of ``obj``, where it is."""

    def warn(path: str, message: str) -> None:
        log.warning(
            "%s: %s: %s",
            obj.source,
            key_path(obj, key, path),
            message,
            extra={"config_source": obj.source, "config_path": path},
        )

    return warn


def read_sharing(
    root: Mapping[object, object], report: Report, warn: Warn, names: set[str] | None = None
) -> Sharing:
    """``sharing`` (or its older spelling ``shared``) of an NVIDIA plugin config, checked.

    One of ``timeSlicing`` and ``mps``, as upstream. ``names``: the resources the config defines, when
    it defines them (the per-pool format: replicas for another name are an error); None takes any
    name (the NodeGroup format serves one resource and warns about the rest itself). Shared by both
    formats, so that a config means the same in either.
    """
    key = "sharing"
    if optional(root, "shared") is not MISSING:
        if optional(root, "sharing") is not MISSING:
            report.add("shared", "give sharing or its older name shared, not both")
        else:
            key = "shared"
    section = _section(root, key, key, report)
    check_keys(section, SHARING_KEYS, key, report)
    found: list[tuple[str, Mapping[object, object]]] = []
    for mode, allowed in (("timeSlicing", TIME_SLICING_KEYS), ("mps", MPS_KEYS)):
        if optional(section, mode) is MISSING:
            continue
        body = _section(section, mode, child(key, mode), report)
        check_keys(body, allowed, child(key, mode), report)
        found.append((mode, body))
    if len(found) > 1:
        report.add(key, "give one of timeSlicing and mps, not both (upstream refuses both as well)")
        return Sharing()
    if not found:
        return Sharing()
    mode, body = found[0]
    path = child(key, mode)
    rename = False
    raw = optional(body, "renameByDefault")
    if raw is not MISSING:
        rename = bool(boolean(raw, child(path, "renameByDefault"), report))
    raw = optional(body, "failRequestsGreaterThanOne")
    if raw is not MISSING:
        fail = boolean(raw, child(path, "failRequestsGreaterThanOne"), report)
        if mode == "mps" and fail is False:
            warn(
                child(path, "failRequestsGreaterThanOne"),
                "false is ignored: an MPS pool always refuses a request for more than one replica "
                "(each container gets one memory-limited share), as upstream forces it",
            )
    if mode == "timeSlicing":
        raw = optional(body, "strategy")
        if raw is not MISSING and raw != "":
            report.add(child(path, "strategy"), f"unknown time-slicing strategy {describe_value(raw)}")
    return Sharing(_replicas(body, path, names, report, warn), mode, rename)


def _replicas(
    body: Mapping[object, object], path: str, names: set[str] | None, report: Report, warn: Warn
) -> dict[str, int]:
    """``resources[].replicas`` by resource name (the last ``/`` segment)."""
    raw = optional(body, "resources")
    where = child(path, "resources")
    resources = [] if raw is MISSING else sequence(raw, where, report) or []
    replicas: dict[str, int] = {}
    first: dict[str, str] = {}
    for index, raw_entry in enumerate(resources):
        entry_path = item(where, index)
        entry = mapping(raw_entry, entry_path, report, "a mapping with name and replicas")
        if entry is None:
            continue
        check_keys(entry, REPLICATED_KEYS, entry_path, report)
        name = _replicated_name(entry, child(entry_path, "name"), names, report)
        raw_count = optional(entry, "replicas")
        count: int | None = None
        if raw_count is MISSING:
            report.add(child(entry_path, "replicas"), "required")
        else:
            count = integer(
                raw_count, child(entry_path, "replicas"), MIN_SLICES_PER_UNIT, MAX_SLICES_PER_UNIT, report
            )
        _ignored(entry, entry_path, warn)
        if name is None or count is None:
            continue
        if name in first:
            report.add(child(entry_path, "name"), f"replicas for {name!r} are already given at {first[name]}")
            continue
        first[name] = entry_path
        replicas[name] = count
    return replicas


def _replicated_name(
    entry: Mapping[object, object], path: str, names: set[str] | None, report: Report
) -> str | None:
    raw = optional(entry, "name")
    if raw is MISSING:
        report.add(path, "required: the resource these replicas apply to")
        return None
    text = string(raw, path, report)
    if text is None:
        return None
    name = text.strip().rpartition("/")[2].strip()
    if names is not None and name not in names:
        defined = ", ".join(sorted(names)) or "none"
        report.add(path, f"{text!r} names no resource of resources.gpus (defined: {defined})")
        return None
    return name


def _ignored(entry: Mapping[object, object], path: str, warn: Warn) -> None:
    """Upstream overrides ``rename`` and ``devices`` at start-up with a warning; so do we."""
    if optional(entry, "rename") is not MISSING:
        warn(child(path, "rename"), "ignored, as upstream does: renameByDefault decides the shared name")
    devices = optional(entry, "devices")
    if devices is not MISSING and devices != "all":
        warn(child(path, "devices"), "ignored, as upstream does: every card of the resource is shared")
