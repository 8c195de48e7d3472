"""What the pool formats may know about the node they are read on: its name and its labels.

Most formats are cluster-wide documents and need neither. The DKP NodeGroup format (:mod:`.nodegroup`)
holds several configs and lets a node label pick one, so its pools depend on the node: the same
ConfigMap gives other pools when the label changes. The labels come from the API (the Node watched,
:mod:`.nodewatch`) or, without API access, from the command line (``--node-config-label``); ``labels`` is
``None`` while nothing says what they are, so a format can tell "no such label" from "not known".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hcs_deviceplugin.fieldrepr import field_repr


@field_repr
@dataclass(frozen=True, repr=False)
class NodeContext:
    """The node's name and labels as far as they are known (``labels is None``: not known at all)."""

    name: str = ""
    labels: Mapping[str, str] | None = None
    origin: str = field(default="", compare=False)
    """Where the labels came from (``Node k8s-w1``, ``--node-config-label``), for messages."""

    def __post_init__(self) -> None:
        if self.labels is not None:
            object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))

    def label(self, key: str) -> str | None:
        """The label's value, or ``None`` when absent or when the labels are not known."""
        return None if self.labels is None else self.labels.get(key)


UNKNOWN_NODE = NodeContext()
