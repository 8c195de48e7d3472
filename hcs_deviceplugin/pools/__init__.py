"""Pool configuration: ConfigMaps in, one validated :class:`~hcs_deviceplugin.model.PoolSet` out.

This package is the daemon's config API (STYLE.md): nothing else imports raw YAML.

* **Formats** turn one ConfigMap (:class:`.objects.ConfigMapObject`) into ``Pool`` values and know
  nothing about where it came from: native (:mod:`.native`), DKP per-pool NVIDIA config (:mod:`.dkp`),
  DKP ADR allowlist (:mod:`.allowlist`), DKP NodeGroup (:mod:`.nodegroup`, whose config a node label
  picks: :mod:`.node`); :mod:`.formats` recognises which one an object is.
* **Sources** know where objects come from and when they change: the mounted directory
  (:mod:`.directory`, reading :mod:`.mounted` layouts) and the API watch (:mod:`.apisource`); this
  node's labels come from the Node watch (:mod:`.nodewatch`) or the command line.
* **The aggregator** (:mod:`.aggregate`) takes every source's objects, keeps the newest copy and each
  object's last good parse, merges them into one PoolSet and reports changes.

Errors are values (:mod:`.errors`) so sources can keep, compare and report them.

The names below are imported on first use, not with the package: every ``pools.<module>`` import
runs this file first, and a native-only ``run`` must not pay for the DKP parsers
(:mod:`.shapes` recognises a format without them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hcs_deviceplugin.pools.aggregate import PoolAggregator
    from hcs_deviceplugin.pools.allowlist import parse_allowlist
    from hcs_deviceplugin.pools.conflicts import DeviceKey, device_key, find_conflicts, selectors_overlap
    from hcs_deviceplugin.pools.directory import DirectoryPoolSource
    from hcs_deviceplugin.pools.dkp import parse_dkp_plugin_config
    from hcs_deviceplugin.pools.document import Syntax, load_document
    from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
    from hcs_deviceplugin.pools.formats import Format, detect_format, parse_configmap
    from hcs_deviceplugin.pools.names import validate_extended_resource_name, validate_pool_name
    from hcs_deviceplugin.pools.native import parse_native, parse_native_data
    from hcs_deviceplugin.pools.objects import ConfigMapObject

_HOME = {
    "ConfigError": "hcs_deviceplugin.pools.errors",
    "ConfigErrors": "hcs_deviceplugin.pools.errors",
    "ConfigMapObject": "hcs_deviceplugin.pools.objects",
    "DeviceKey": "hcs_deviceplugin.pools.conflicts",
    "DirectoryPoolSource": "hcs_deviceplugin.pools.directory",
    "Format": "hcs_deviceplugin.pools.formats",
    "PoolAggregator": "hcs_deviceplugin.pools.aggregate",
    "Syntax": "hcs_deviceplugin.pools.document",
    "detect_format": "hcs_deviceplugin.pools.formats",
    "device_key": "hcs_deviceplugin.pools.conflicts",
    "find_conflicts": "hcs_deviceplugin.pools.conflicts",
    "load_document": "hcs_deviceplugin.pools.document",
    "parse_allowlist": "hcs_deviceplugin.pools.allowlist",
    "parse_configmap": "hcs_deviceplugin.pools.formats",
    "parse_dkp_plugin_config": "hcs_deviceplugin.pools.dkp",
    "parse_native": "hcs_deviceplugin.pools.native",
    "parse_native_data": "hcs_deviceplugin.pools.native",
    "selectors_overlap": "hcs_deviceplugin.pools.conflicts",
    "validate_extended_resource_name": "hcs_deviceplugin.pools.names",
    "validate_pool_name": "hcs_deviceplugin.pools.names",
}
"""Where each public name lives, for :func:`__getattr__`."""


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "ConfigError",
    "ConfigErrors",
    "ConfigMapObject",
    "DeviceKey",
    "DirectoryPoolSource",
    "Format",
    "PoolAggregator",
    "Syntax",
    "detect_format",
    "device_key",
    "find_conflicts",
    "load_document",
    "parse_allowlist",
    "parse_configmap",
    "parse_dkp_plugin_config",
    "parse_native",
    "parse_native_data",
    "selectors_overlap",
    "validate_extended_resource_name",
    "validate_pool_name",
]
