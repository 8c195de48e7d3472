"""The DKP NodeGroup format: one ConfigMap per NodeGroup, four named NVIDIA plugin configs, a node label
picks one.

DKP's node-manager (``modules/040-node-manager/templates/nvidia-gpu/``) renders, for each NodeGroup with
a ``gpu`` section, a ConfigMap ``nvidia-device-plugin-<first 7 hex digits of sha256(NodeGroup name)>``
(label ``app=nvidia-gpu``) whose data keys are whole NVIDIA device plugin configs, one per sharing mode:

==================  ===================================================================================
``Exclusive``       ``flags.migStrategy: none``
``TimeSlicing``     ``sharing.timeSlicing``: ``nvidia.com/gpu`` × ``partitionCount`` replicas (default 4),
                    ``failRequestsGreaterThanOne: true``
``MPS``             ``sharing.mps``: ``nvidia.com/gpu`` × 4 replicas, ``renameByDefault: false``;
                    a pool with ``sharing: mps`` (the NVIDIA backend runs a control daemon per card)
``Mig``             ``flags.migStrategy: mixed`` (older renderings: ``MIG``)
==================  ===================================================================================

Upstream's config-manager sidecar copies the key named by the node label
``node.deckhouse.io/device-gpu.config`` (set from ``NodeGroup.spec.gpu.sharing``) to the plugin's config
file, and restarts the plugin when the label changes. We do the same without a restart: the label is part
of the :class:`~hcs_deviceplugin.pools.node.NodeContext` the config is parsed with, so a new label is a
new PoolSet and only the pools that differ change.

Choices, where upstream's behaviour does not carry over as it is:

* **Which ConfigMap.** When the node's ``node.deckhouse.io/group`` label is known, a NodeGroup ConfigMap
  named for another group (its hash differs) gives no pools: a namespace holds one per NodeGroup and only
  ours applies. Without the label, every NodeGroup ConfigMap seen applies (mount only ours).
* **Which config.** The label's value names a key exactly, as upstream; failing that, a key equal to it
  when case, ``-`` and ``_`` are ignored (``time-slicing``, ``timeSlicing`` → ``TimeSlicing``: renderings
  of the label have spelled it so), with a warning. A value naming no key is an error. Without the label,
  upstream's fallback ``single`` applies: a ConfigMap with one config uses it; otherwise it is an error
  that says the label is missing or unknown (no ``--watch-node`` and no ``--node-config-label``).
* **Which cards.** Upstream's default resource is every GPU NVML sees. This daemon serves other vendors
  too, so the default selector is the pattern ``GPU-``: NVIDIA GPU UUIDs, and nothing else's ids.
* **Resource names** are upstream's: ``nvidia.com/gpu`` (``.shared`` with ``renameByDefault: true``) and
  ``nvidia.com/mig-<profile>``; ``NVIDIA_RESOURCE_PREFIX`` or ``flags.resourcePrefix`` replace
  ``nvidia.com``. Pools are named after them with ``nvidia-`` in front (``nvidia-gpu``,
  ``nvidia-mig-1g-10gb``), as pool names must be DNS labels.
* **MIG.** Upstream advertises the MIG devices it finds, one resource per profile. Here a card serves
  one pool, so the profile comes from the layout DKP asks mig-manager for, the node label
  ``nvidia.com/mig.config``: ``all-<profile>`` gives one Partition pool of that profile (``mixed``:
  ``nvidia.com/mig-<profile>``, ``single``: ``nvidia.com/gpu``); ``all-disabled`` or no label gives
  whole cards as ``nvidia.com/gpu``; a layout with several profiles per card is an error that says so.
* **Plugin options.** The configs carry none; DKP's plugin DaemonSet sets ``PASS_DEVICE_SPECS=true``,
  ``DEVICE_LIST_STRATEGY=envvar``, ``DEVICE_ID_STRATEGY=uuid``, and those are the defaults here (the same
  env variables override them, as upstream; a config's own ``plugin`` section overrides both).
* Otherwise a config is read with the per-pool format's rules (:mod:`.dkp`): strict keys, upstream types.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping

from hcs_deviceplugin.model import DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools import dkp
from hcs_deviceplugin.pools.delivery import delivery_from_strategies
from hcs_deviceplugin.pools.document import load_document
from hcs_deviceplugin.pools.errors import DOCUMENT_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.fields import (
    MISSING,
    Report,
    check_keys,
    describe_value,
    mapping,
    optional,
)
from hcs_deviceplugin.pools.located import LocatedPool, in_key, key_path
from hcs_deviceplugin.pools.names import validate_extended_resource_name
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.objects import ConfigMapObject
from hcs_deviceplugin.pools.shapes import NODEGROUP_NAME_RE

log = logging.getLogger(__name__)

NODE_CONFIG_LABEL = "node.deckhouse.io/device-gpu.config"
NODE_GROUP_LABEL = "node.deckhouse.io/group"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_DISABLED = "all-disabled"
DEFAULT_RESOURCE_DOMAIN = "nvidia.com"
GPU_RESOURCE = "gpu"
GPU_SELECTOR = DeviceSelector(pattern="GPU-")
"""NVIDIA GPU UUIDs (``GPU-…``) and no other vendor's card ids."""
POOL_PREFIX = "nvidia-"

PLUGIN_DEFAULTS: Mapping[str, str] = {
    "passDeviceSpecs": "true",
    "deviceListStrategy": "envvar",
    "deviceIDStrategy": "uuid",
}
"""What DKP's plugin DaemonSet sets through the environment."""
PLUGIN_ENV = {
    "passDeviceSpecs": "PASS_DEVICE_SPECS",
    "deviceListStrategy": "DEVICE_LIST_STRATEGY",
    "deviceIDStrategy": "DEVICE_ID_STRATEGY",
}


def nodegroup_hash(group: str) -> str:
    """The suffix DKP gives the NodeGroup's ConfigMap: ``sha256sum | trunc 7`` of its name."""
    return hashlib.sha256(group.encode()).hexdigest()[:7]


def _normalized(name: str) -> str:
    return name.replace("-", "").replace("_", "").lower()


def parse_nodegroup_located(
    obj: ConfigMapObject, node: NodeContext, env: Mapping[str, str] | None = None
) -> list[LocatedPool]:
    """The pools of the config this node's label picks; raises :class:`ConfigErrors` with every problem."""
    environ = os.environ if env is None else env
    group = node.label(NODE_GROUP_LABEL)
    named = NODEGROUP_NAME_RE.fullmatch(obj.name)
    if group is not None and named is not None and named["hash"] != nodegroup_hash(group):
        log.debug("%s belongs to another NodeGroup than %r; not ours", obj.source, group)
        return []
    key = _choose(obj, node)
    text = obj.data[key]
    try:
        document = load_document(text, obj.source)
    except ConfigErrors as exc:
        raise ConfigErrors(in_key(exc.errors, obj, key)) from exc

    warn = dkp.warner(obj, key)
    report = Report(obj.source)
    pools = _config(document, obj.source, node, environ, report, warn)
    if report.errors:
        raise ConfigErrors(in_key(report.errors, obj, key))
    return [LocatedPool(p.pool, key_path(obj, key, p.path)) for p in pools]


def parse_every_config(
    obj: ConfigMapObject, env: Mapping[str, str] | None = None
) -> dict[str, list[LocatedPool]]:
    """Each config of ``obj`` parsed as if the node's label named it, for checking a ConfigMap offline
    (``validate-config`` knows no node); raises :class:`ConfigErrors` with the problems of every config."""
    found: dict[str, list[LocatedPool]] = {}
    errors: list[ConfigError] = []
    for key in sorted(k for k in obj.data if not k.startswith(".")):
        node = NodeContext(labels={NODE_CONFIG_LABEL: key}, origin="validate-config")
        try:
            found[key] = parse_nodegroup_located(obj, node, env)
        except ConfigErrors as exc:
            errors += exc.errors
    if errors:
        raise ConfigErrors(errors)
    return found


def _choose(obj: ConfigMapObject, node: NodeContext) -> str:
    """The data key the node's label names (see the module docstring); raises when there is none."""
    keys = sorted(k for k in obj.data if not k.startswith("."))
    wanted = node.label(NODE_CONFIG_LABEL)
    if wanted is None:
        if len(keys) == 1:
            return keys[0]
        why = (
            "the node's labels are not known "
            f"(give --node-config-label {NODE_CONFIG_LABEL}=<config>, or --watch-node)"
            if node.labels is None
            else f"node {node.name or '(this node)'} has no label {NODE_CONFIG_LABEL}"
        )
        message = f"{why}, so none of the configs {', '.join(keys) or '(none)'} can be chosen"
        raise ConfigErrors([ConfigError(obj.source, "data", message)])
    if wanted in obj.data:
        return wanted
    close = [k for k in keys if _normalized(k) == _normalized(wanted)]
    if len(close) == 1:
        log.warning(
            "%s: label %s=%s names no config exactly; using %s",
            obj.source,
            NODE_CONFIG_LABEL,
            wanted,
            close[0],
        )
        return close[0]
    message = (
        f"the node label {NODE_CONFIG_LABEL}={wanted} names no config here "
        f"(configs: {', '.join(keys) or 'none'})"
    )
    raise ConfigErrors([ConfigError(obj.source, "data", message)])


def _config(
    document: object, source: str, node: NodeContext, env: Mapping[str, str], report: Report, warn: dkp.Warn
) -> list[LocatedPool]:
    if document is None:
        report.add(DOCUMENT_PATH, "empty; needs at least version: v1 (an NVIDIA device plugin config)")
        return []
    root = mapping(document, DOCUMENT_PATH, report, "a mapping (an NVIDIA device plugin config)")
    if root is None:
        return []
    check_keys(root, dkp.TOP_LEVEL_KEYS, "", report)
    version = optional(root, "version")
    if version is not MISSING and version != dkp.VERSION:
        report.add("version", f"must be {dkp.VERSION!r}, got {describe_value(version)}")
    flags = dkp._flags(root, report)
    delivery, options = delivery_from_strategies(
        {**PLUGIN_DEFAULTS, **_env_options(env), **dkp._plugin_options(root, flags, report)}
    )
    strategy = options.get("migStrategy", "none")
    domain = dkp._explicit_prefix(flags, env, report) or DEFAULT_RESOURCE_DOMAIN
    if optional(root, "resources") is not MISSING:
        report.add(
            "resources",
            "not supported in a NodeGroup config (DKP renders none): the config serves every GPU of the "
            "node; use the per-pool format to pick cards",
        )
    sharing = dkp.read_sharing(root, report, warn)
    if not report.clean_since(0):
        return []
    layout = _layout(strategy, node, report)
    if layout is None:
        return []
    unit, profile, resource = layout
    slices = sharing.replicas.get(resource, 1)
    for named in sorted(set(sharing.replicas) - {resource}):
        warn("sharing", f"replicas for {named!r}, which is not served here ({resource!r}); ignored")
    mps = sharing.mode == "mps"
    if mps and not dkp.check_mps_replicas(resource, slices, report):
        return []
    renamed = resource + (dkp.SHARED_SUFFIX if sharing.rename and slices > 1 else "")
    resource_name = f"{domain}/{renamed}"
    problem = validate_extended_resource_name(resource_name)
    if problem is not None:
        report.add("flags.resourcePrefix", f"resource name {resource_name!r} is invalid: {problem}")
        return []
    pool = Pool(
        name=POOL_PREFIX + re.sub(r"[^a-z0-9]+", "-", renamed.lower()).strip("-"),
        resource_name=resource_name,
        unit=unit,
        slices_per_unit=slices,
        profile=profile,
        devices=(GPU_SELECTOR,),
        source=source,
        options=options,
        sharing="mps" if mps else "",
        device_delivery=delivery,
    )
    return [LocatedPool(pool, "flags.migStrategy")]


def _env_options(env: Mapping[str, str]) -> dict[str, str]:
    return {name: env[var] for name, var in PLUGIN_ENV.items() if env.get(var)}


def _layout(strategy: str, node: NodeContext, report: Report) -> tuple[UnitKind, str | None, str] | None:
    """(unit, profile, resource) the node serves under ``strategy`` (see "MIG" in the module docstring)."""
    if strategy == "none":
        return UnitKind.CARD, None, GPU_RESOURCE
    layout = node.label(MIG_CONFIG_LABEL)
    if layout is None or layout == MIG_DISABLED:
        return UnitKind.CARD, None, GPU_RESOURCE
    profile = layout.removeprefix("all-") if layout.startswith("all-") else None
    if not profile or not re.fullmatch(r"[1-7]g\.[0-9]+gb(\+[a-z]+)?", profile):
        report.add(
            "flags.migStrategy",
            f"{strategy}: the node's MIG layout {MIG_CONFIG_LABEL}={layout} is not all-<profile> "
            "(one profile per card), and a card serves one pool here; use all-<profile> layouts or "
            "native Partition pools",
        )
        return None
    resource = GPU_RESOURCE if strategy == "single" else "mig-" + profile.replace("+", ".")
    return UnitKind.PARTITION, profile, resource
