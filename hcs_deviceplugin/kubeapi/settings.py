"""Where ``run`` watches pool ConfigMaps through the Kubernetes API, as its command line says.

Apart from :mod:`hcs_deviceplugin.runner` so that a start without ``--in-cluster`` or
``--kubeconfig`` (a mounted pools directory only) does not create the class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.fieldrepr import field_repr


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class ApiSettings:
    """Where to watch pool ConfigMaps through the Kubernetes API (optional)."""

    namespace: str
    label_selector: str
    in_cluster: bool = False
    kubeconfig: Path | None = None
