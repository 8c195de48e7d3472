"""ConfigMaps as the pool sources see them, before any format is applied.

Both sources (a mounted directory and the Kubernetes API) turn what they read into
:class:`ConfigMapObject` values; the formats (native, DKP per-pool, DKP ADR allowlist) then parse one
object at a time, so one broken object never affects another. ``resource_version`` lets the
aggregator keep the newest copy of an object that both sources deliver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hcs_deviceplugin.fieldrepr import field_repr


def _frozen(values: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(values or {}))


@field_repr
@dataclass(frozen=True, repr=False)
class ConfigMapObject:
    """One ConfigMap: identity, labels, data keys, and where it was read from.

    ``source`` is what error messages name: a file path for the mounted directory
    (``/etc/hcs-deviceplugin/pools/team-a/config.yaml`` style) or ``configmap <ns>/<name>`` for the
    API. ``resource_version`` is the API's opaque version ("" for files, which never beat the API).
    """

    name: str
    namespace: str = ""
    data: Mapping[str, str] = field(default_factory=lambda: _frozen(None))
    labels: Mapping[str, str] = field(default_factory=lambda: _frozen(None))
    resource_version: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", _frozen(self.data))
        object.__setattr__(self, "labels", _frozen(self.labels))

    @property
    def key(self) -> tuple[str, str]:
        """Identity across sources: (namespace, name)."""
        return (self.namespace, self.name)
