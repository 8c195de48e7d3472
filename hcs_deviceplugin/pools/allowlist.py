"""The DKP ADR allowlist format (POOLS.md §3): ``gpu-device-plugin-<pool>`` with ``DP_ALLOWED_DEVICES``.

The value lists the inventoryIDs of the pool's cards, one per line; the pool serves whole cards,
exclusively, as ``gpu.deckhouse.io/<pool>``. It is the simplest format and the easiest to get subtly
wrong by hand, so each line is checked against the shape the control plane builds
(:func:`hcs_deviceplugin.model.inventory_id`) and a line given twice is an error rather than merged:
a duplicate usually means a different card was meant.

Choices where POOLS.md is silent: blank lines and spaces around an ID are ignored; the ConfigMap may
hold no other key; an empty list is a valid pool with no cards; an inventoryID is ``[a-z0-9-]`` only,
either the full ``<node>-<slot>-<vendor>-<device>`` shape or exactly 63 characters (the control plane
cuts longer IDs to 63, which may cut into the suffix). The ADR's own example lists
``<node>-<pciAddress>`` entries (``worker-01-0000:17:00.0``); those are not inventoryIDs and are
refused with a message that says what is expected.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hcs_deviceplugin.model import DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.located import LocatedPool, key_path
from hcs_deviceplugin.pools.names import DNS1123_LABEL_MAX_LENGTH, validate_pool_name
from hcs_deviceplugin.pools.native import DEFAULT_RESOURCE_PREFIX
from hcs_deviceplugin.pools.objects import ConfigMapObject
from hcs_deviceplugin.pools.shapes import ALLOWLIST_KEY

NAME_PREFIX = "gpu-device-plugin-"
NAME_PATH = "metadata.name"

INVENTORY_ID_RE = re.compile(r"[a-z0-9-]+-(?:0|[1-9][0-9]*)-[0-9a-f]{4}-[0-9a-f]{4}")
_TRUNCATED_RE = re.compile(rf"[a-z0-9-]{{{DNS1123_LABEL_MAX_LENGTH}}}")

ErrorSink = Callable[[str, str], None]


def is_inventory_id(value: str) -> bool:
    """Whether ``value`` has the shape of an inventoryID the control plane builds (see module docstring)."""
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        return False
    return INVENTORY_ID_RE.fullmatch(value) is not None or _TRUNCATED_RE.fullmatch(value) is not None


def parse_allowlist(obj: ConfigMapObject) -> list[Pool]:
    """The one pool of an allowlist ConfigMap; raises :class:`ConfigErrors` with every problem."""
    return [located.pool for located in parse_allowlist_located(obj)]


def parse_allowlist_located(obj: ConfigMapObject) -> list[LocatedPool]:
    """:func:`parse_allowlist`, with the field path that names the pool (the object's name)."""
    errors: list[ConfigError] = []

    def error(path: str, message: str) -> None:
        errors.append(ConfigError(obj.source, path, message))

    name = _pool_name(obj, error)
    for key in sorted(obj.data):
        if key != ALLOWLIST_KEY:
            error(key_path(obj, key), f"unexpected key; an allowlist ConfigMap holds only {ALLOWLIST_KEY}")
    text = obj.data.get(ALLOWLIST_KEY)
    if text is None:
        error("data", f"needs the key {ALLOWLIST_KEY} (inventoryIDs, one per line)")
        raise ConfigErrors(errors)
    devices = _devices(obj, text, error)
    if errors or name is None:
        raise ConfigErrors(errors)
    pool = Pool(
        name=name,
        resource_name=f"{DEFAULT_RESOURCE_PREFIX}/{name}",
        unit=UnitKind.CARD,
        slices_per_unit=1,
        devices=devices,
        source=obj.source,
    )
    return [LocatedPool(pool, NAME_PATH)]


def _pool_name(obj: ConfigMapObject, error: ErrorSink) -> str | None:
    if not obj.name.startswith(NAME_PREFIX):
        error(NAME_PATH, f"{obj.name!r}: an allowlist ConfigMap is named {NAME_PREFIX}<pool>")
        return None
    name = obj.name[len(NAME_PREFIX) :]
    problem = validate_pool_name(name)
    if problem is not None:
        error(NAME_PATH, f"pool name {name!r} (from {obj.name!r}): {problem}")
        return None
    return name


def _devices(obj: ConfigMapObject, text: str, error: ErrorSink) -> tuple[DeviceSelector, ...]:
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        value = line.strip()
        if not value:
            continue
        path = key_path(obj, ALLOWLIST_KEY, f"line {number}")
        if not is_inventory_id(value):
            error(
                path,
                f"{value!r} is not an inventoryID: <node>-<slot>-<pciVendor>-<pciDevice> in lower case, "
                "at most 63 characters, e.g. 'k8s-w1-0-10de-2203'",
            )
        elif value in seen:
            error(path, f"{value!r} is listed again (first on line {seen[value]})")
        else:
            seen[value] = number
    return tuple(DeviceSelector(inventory_id=value) for value in seen)
