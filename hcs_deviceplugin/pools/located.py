"""Where in a ConfigMap a pool or an error is: the data key, then the field path inside it.

A ConfigMap carries several documents under its data keys, so a field path alone
(``pools[0].slicesPerUnit``) does not say which one is wrong. Errors from keyed data therefore name
the key first (``config.yaml: resources.gpus[0].pattern``), unless the object's ``source`` already
names the key's file (a top-level file of the mounted directory is an object of its own, and its
errors read exactly as they did before objects existed: ``/etc/pools/a.yaml: pools[0].name``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Pool
from hcs_deviceplugin.pools.errors import ConfigError
from hcs_deviceplugin.pools.objects import ConfigMapObject


@field_repr
@dataclass(frozen=True, repr=False)
class LocatedPool:
    """A parsed pool and the field path of its name, for errors about the pool as a whole.

    The aggregator reports a pool defined by two objects against the losing object's definition, so it
    needs to know where in that object the pool was defined.
    """

    pool: Pool
    path: str


def key_path(obj: ConfigMapObject, key: str, path: str = "") -> str:
    """``path`` inside data key ``key`` of ``obj``, as errors show it (see the module docstring)."""
    if obj.source == key or obj.source.endswith("/" + key):
        return path or key
    return f"{key}: {path}" if path else key


def in_key(errors: Iterable[ConfigError], obj: ConfigMapObject, key: str) -> list[ConfigError]:
    """Errors found in the document under ``key``, re-pathed to say so and re-sourced to ``obj``."""
    return [ConfigError(obj.source, key_path(obj, key, e.path), e.message) for e in errors]
