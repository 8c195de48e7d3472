"""What each DKP format looks like from the outside: the tests :mod:`.formats` recognises it by.

Recognising runs on every ConfigMap, parsing only on those of one format; these tests (names,
labels, keys) live apart from the parsers (:mod:`.allowlist`, :mod:`.dkp`, :mod:`.nodegroup`) so
that a node whose pools are all native never imports the DKP parsers. Each parser module re-exports
its format's test and constants under the names it always had.
"""

from __future__ import annotations

import re

from hcs_deviceplugin.pools.objects import ConfigMapObject

ALLOWLIST_KEY = "DP_ALLOWED_DEVICES"
ALLOWLIST_NAME_RE = re.compile(r"gpu-device-plugin-(?P<pool>[a-z0-9]([-a-z0-9]*[a-z0-9])?)")

DKP_APP_LABEL = "app"
DKP_APP_LABEL_VALUE = "nvidia-device-plugin"
DKP_NAME_RE = re.compile(r"nvidia-device-plugin-(?P<pool>.+)-config")

NODEGROUP_APP_LABEL_VALUE = "nvidia-gpu"
NODEGROUP_NAME_RE = re.compile(r"nvidia-device-plugin-(?P<hash>[0-9a-f]{7})")
NODEGROUP_CONFIG_NAMES = ("Exclusive", "TimeSlicing", "MPS", "Mig", "MIG")


def is_allowlist(obj: ConfigMapObject) -> bool:
    """Whether ``obj`` is shaped like an ADR allowlist: it has the key, or the name (``<pool>`` a label)."""
    return ALLOWLIST_KEY in obj.data or ALLOWLIST_NAME_RE.fullmatch(obj.name) is not None


def is_dkp_plugin_config(obj: ConfigMapObject) -> bool:
    """Whether ``obj`` is shaped like a DKP per-pool config: by its label, or by its name (mounted
    files carry no labels)."""
    return obj.labels.get(DKP_APP_LABEL) == DKP_APP_LABEL_VALUE or DKP_NAME_RE.fullmatch(obj.name) is not None


def is_nodegroup_config(obj: ConfigMapObject) -> bool:
    """Shaped like a NodeGroup ConfigMap: by name, by label, or by its keys being config names (a
    mounted copy may be named anything and carries no labels)."""
    keys = [k for k in obj.data if not k.startswith(".")]
    return (
        NODEGROUP_NAME_RE.fullmatch(obj.name) is not None
        or obj.labels.get(DKP_APP_LABEL) == NODEGROUP_APP_LABEL_VALUE
        or (bool(keys) and all(k in NODEGROUP_CONFIG_NAMES for k in keys))
    )
