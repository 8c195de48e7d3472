"""One ConfigMap in, its pools out, whichever of the three formats it is written in.

Sources deliver :class:`ConfigMapObject` values without knowing the formats; this module recognises
the format from what the object looks like, so the same ConfigMap parses the same way whether it came
from the API (with labels) or from a mounted directory (name and keys only):

1. **ADR allowlist** (:mod:`.allowlist`): a ``DP_ALLOWED_DEVICES`` key, or a name
   ``gpu-device-plugin-<pool>``.
2. **DKP per-pool** (:mod:`.dkp`): the label ``app=nvidia-device-plugin``, or a name
   ``nvidia-device-plugin-<pool>-config``.
3. **DKP NodeGroup** (:mod:`.nodegroup`): the label ``app=nvidia-gpu``, a name
   ``nvidia-device-plugin-<7 hex digits>``, or data keys that are all config names (``Exclusive``,
   ``TimeSlicing``, ``MPS``, ``Mig``). Its pools depend on the node's labels
   (:class:`~hcs_deviceplugin.pools.node.NodeContext`).
4. **Native** (:mod:`.native`) otherwise: every data key named ``*.yaml``, ``*.yml`` or ``*.json``
   (``pools.yaml`` by convention) is one native document, and other keys (a README) are not read —
   the behaviour the mounted directory always had. Keys starting with ``.`` are never read.

An object shaped like two of the DKP formats is an error rather than a guess. Every error
names the object's ``source``; errors inside a key's document name the key first.

Every object passes here, whichever source delivered it, so this is where an object over the size
limit (:mod:`.limits`) is refused before any format reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum

from hcs_deviceplugin.model import Pool
from hcs_deviceplugin.pools.document import Syntax
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.limits import check_object_size
from hcs_deviceplugin.pools.located import LocatedPool, in_key, key_path
from hcs_deviceplugin.pools.native import parse_native, warn_no_pools
from hcs_deviceplugin.pools.node import UNKNOWN_NODE, NodeContext
from hcs_deviceplugin.pools.objects import ConfigMapObject
from hcs_deviceplugin.pools.shapes import is_allowlist, is_dkp_plugin_config, is_nodegroup_config

NATIVE_SUFFIXES: Mapping[str, Syntax] = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}


class Format(StrEnum):
    """The pool formats a ConfigMap can be written in (POOLS.md §1-3)."""

    NATIVE = "native"
    DKP = "dkp-per-pool"
    ALLOWLIST = "dkp-allowlist"
    NODEGROUP = "dkp-nodegroup"


_LOOKS_LIKE = {
    Format.ALLOWLIST: "a DKP allowlist (name gpu-device-plugin-<pool> or key DP_ALLOWED_DEVICES)",
    Format.DKP: (
        "a DKP per-pool config (label app=nvidia-device-plugin or name nvidia-device-plugin-<pool>-config)"
    ),
    Format.NODEGROUP: (
        "a DKP NodeGroup config (label app=nvidia-gpu, name nvidia-device-plugin-<hash>, or only "
        "config-name keys)"
    ),
}


def native_syntax(key: str) -> Syntax | None:
    """How a data key of a native ConfigMap is read, or ``None`` when it is not a pool document."""
    if key.startswith("."):
        return None
    return NATIVE_SUFFIXES.get(os.path.splitext(key)[1])


def detect_format(obj: ConfigMapObject) -> Format:
    """Which format ``obj`` is in (see the module docstring); raises when it looks like two."""
    kinds = [
        kind
        for kind, test in (
            (Format.ALLOWLIST, is_allowlist),
            (Format.DKP, is_dkp_plugin_config),
            (Format.NODEGROUP, is_nodegroup_config),
        )
        if test(obj)
    ]
    if len(kinds) > 1:
        shapes = " and ".join(_LOOKS_LIKE[kind] for kind in kinds)
        raise ConfigErrors([ConfigError(obj.source, "metadata", f"looks like both {shapes}; it must be one")])
    return kinds[0] if kinds else Format.NATIVE


def parse_configmap(
    obj: ConfigMapObject, env: Mapping[str, str] | None = None, node: NodeContext = UNKNOWN_NODE
) -> list[Pool]:
    """The pools ``obj`` defines; raises :class:`ConfigErrors` with every problem found.

    ``env`` (default ``os.environ``) is where the DKP formats find ``NVIDIA_RESOURCE_PREFIX``; ``node``
    is what the NodeGroup format chooses its config by.
    """
    return [located.pool for located in parse_configmap_located(obj, env, node)]


def parse_configmap_located(
    obj: ConfigMapObject, env: Mapping[str, str] | None = None, node: NodeContext = UNKNOWN_NODE
) -> list[LocatedPool]:
    """:func:`parse_configmap`, with the field path of each pool's definition."""
    check_object_size(obj)
    kind = detect_format(obj)
    # The DKP parsers are imported when an object of theirs arrives: a native-only node never needs them.
    if kind is Format.ALLOWLIST:
        from hcs_deviceplugin.pools.allowlist import parse_allowlist_located

        return parse_allowlist_located(obj)
    if kind is Format.DKP:
        from hcs_deviceplugin.pools.dkp import parse_dkp_located

        return parse_dkp_located(obj, env)
    if kind is Format.NODEGROUP:
        from hcs_deviceplugin.pools.nodegroup import parse_nodegroup_located

        return parse_nodegroup_located(obj, node, env)
    return parse_native_located(obj)


def depends_on_node(obj: ConfigMapObject) -> bool:
    """Whether ``obj``'s pools change with the node's labels (a NodeGroup config): such objects are
    parsed again when the labels change."""
    try:
        return detect_format(obj) is Format.NODEGROUP
    except ConfigErrors:
        return False


def parse_native_located(obj: ConfigMapObject) -> list[LocatedPool]:
    """Every native document among ``obj``'s keys, in key order; a pool defined in two keys is an error."""
    errors: list[ConfigError] = []
    located: list[LocatedPool] = []
    owners: dict[str, str] = {}
    for key in sorted(obj.data):
        syntax = native_syntax(key)
        if syntax is None:
            continue
        try:
            pools = parse_native(obj.data[key], obj.source, syntax)
        except ConfigErrors as exc:
            errors += in_key(exc.errors, obj, key)
            continue
        if not pools:
            where = key_path(obj, key)
            warn_no_pools(obj.source if where == key else f"{obj.source}: {key}")
        for index, pool in enumerate(pools):
            path = key_path(obj, key, f"pools[{index}].name")
            if pool.name in owners:
                errors.append(
                    ConfigError(
                        obj.source, path, f"pool {pool.name!r} is also defined at {owners[pool.name]}"
                    )
                )
                continue
            owners[pool.name] = path
            located.append(LocatedPool(pool, path))
    if errors:
        raise ConfigErrors(errors)
    return located
