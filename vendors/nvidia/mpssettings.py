"""MPS's sharing mode name and options: what a start needs to parse ``--backend-option nvidia.mps*``.

The supervisor and the client settings (:mod:`vendors.nvidia.mps`) are loaded by the first pool that
shares a card by MPS; a node without one never imports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr

MODE = "mps"
DEFAULT_ROOT = "/run/nvidia/mps"


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class MpsSettings:
    """``mpsControl`` (the tool; default: ``PATH``, then the driver's bin folders under the host root),
    ``mpsRoot`` (host path), ``mpsCheckSeconds`` (1), ``mpsRetrySeconds`` (5)."""

    control: str | None = None
    root: str = DEFAULT_ROOT
    check_seconds: float = 1.0
    retry_seconds: float = 5.0
