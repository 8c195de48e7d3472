"""The simulated backend: accelerators described in YAML, served like real hardware.

It is the embedded default of ``hcs-deviceplugin simulate`` (a new user sees a heterogeneous node
without owning one) and the hardware of the core's integration tests and benchmarks. The node comes
from, in order: the backend option ``node`` (``--backend-option simulated.node=PATH``), the environment
variable ``HCS_SIMULATED_NODE``, or the built-in ``default_node.yaml``. Either may also be
``builtin:<name>`` for a description shipped under ``nodes/``.
"""

from __future__ import annotations

import os

from hcs_deviceplugin.backend import BackendConfig, BackendOptionError
from vendors.simulated.backend import SimulatedBackend
from vendors.simulated.description import (
    BUILTIN_PREFIX,
    DEFAULT_NODE,
    NodeDescription,
    NodeDescriptionError,
    builtin_node_names,
    load_builtin_node,
    load_node_description,
    parse_node_description,
)

NODE_ENV = "HCS_SIMULATED_NODE"
NODE_OPTION = "node"
KNOWN_OPTIONS = frozenset({NODE_OPTION})

__all__ = [
    "BUILTIN_PREFIX",
    "DEFAULT_NODE",
    "KNOWN_OPTIONS",
    "NODE_ENV",
    "NODE_OPTION",
    "NodeDescription",
    "NodeDescriptionError",
    "SimulatedBackend",
    "builtin_node_names",
    "create_backend",
    "load_builtin_node",
    "load_node_description",
    "node_reference",
    "parse_node_description",
]


def node_reference(config: BackendConfig) -> str:
    """Which description ``config`` selects: a path or ``builtin:<name>``.

    Unknown options are refused rather than ignored, so a misspelt ``nod=...`` does not quietly run the
    default node.
    """
    unknown = sorted(set(config.options) - KNOWN_OPTIONS)
    if unknown:
        known = ", ".join(sorted(KNOWN_OPTIONS))
        raise BackendOptionError(
            f"simulated backend: unknown option(s) {', '.join(unknown)} (known: {known})"
        )
    chosen = config.options.get(NODE_OPTION) or os.environ.get(NODE_ENV)
    return chosen or f"{BUILTIN_PREFIX}{DEFAULT_NODE}"


def create_backend(config: BackendConfig) -> SimulatedBackend:
    """The entry-point factory; BackendAbsent when the node description cannot be used,
    BackendOptionError for an option it does not know."""
    return SimulatedBackend(load_node_description(node_reference(config)), stop=config.stop)
