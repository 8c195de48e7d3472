"""A CDI spec document from ContainerEdits: pure, so it is tested in tables without a host.

Choices (documented in README, "CDI"):

* ``cdiVersion`` is the lowest version that has every field we write (0.5.0: ``hostPath`` of a device
  node), not the newest (0.8.0), because runtimes refuse a spec whose version their vendored CDI
  library does not know, and containerd 1.7 ships a library that stops at 0.6.0. The schema the tests
  validate against is the newest one.
* Each device carries its own device nodes and mounts, the node-wide ones (control devices, driver
  directories) included, so every entry is complete on its own; a runtime adds a node or mount once
  however many requested devices list it. No spec-level edits.
* No environment: variables such as a visible-devices list describe the whole set a container gets,
  and CDI would let each device's value overwrite the one before. They travel in the Allocate answer.
* A device node's ``type``, ``major`` and ``minor`` are written when the host file is a character or
  block device (read by the caller, see :mod:`hcs_deviceplugin.cdi.hostnodes`); otherwise they are
  left out and the runtime reads them from ``hostPath`` itself when it creates the container.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount

CDI_VERSION = "0.5.0"
NEWEST_SPEC_VERSION = "0.8.0"
BIND_OPTIONS = ("nosuid", "nodev", "rbind")

JsonObject = dict[str, Any]


# Made and read within one spec write on one thread: not frozen, so a start compiles no __setattr__ or
# __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class NodeFacts:
    """What the host says a device node is: ``c`` or ``b``, and its numbers."""

    type: str
    major: int
    minor: int


def device_node(node: DeviceNode, facts: NodeFacts | None) -> JsonObject:
    out: JsonObject = {"path": node.container_path, "hostPath": node.host_path}
    if facts is not None:
        out.update(type=facts.type, major=facts.major, minor=facts.minor)
    if node.permissions:
        out["permissions"] = node.permissions
    return out


def mount(m: Mount) -> JsonObject:
    return {
        "hostPath": m.host_path,
        "containerPath": m.container_path,
        "type": "bind",
        "options": ["ro" if m.read_only else "rw", *BIND_OPTIONS],
    }


def device_edits(edits: ContainerEdits, facts: Mapping[str, NodeFacts]) -> JsonObject:
    """The ``containerEdits`` of one device: its nodes and mounts (see the module docstring)."""
    out: JsonObject = {}
    if edits.devices:
        out["deviceNodes"] = [device_node(d, facts.get(d.host_path)) for d in edits.devices]
    if edits.mounts:
        out["mounts"] = [mount(m) for m in edits.mounts]
    return out


def build_spec(
    kind: str, devices: Sequence[tuple[str, ContainerEdits]], facts: Mapping[str, NodeFacts]
) -> JsonObject | None:
    """The spec of ``kind`` with one entry per (name, edits), sorted by name; None if none has edits.

    CDI wants at least one device per spec and edits in each, so an entry without device nodes and
    mounts is left out, and a kind with nothing left has no spec (its file is removed).
    """
    entries = []
    for name, edits in sorted(devices, key=lambda d: d[0]):
        container_edits = device_edits(edits, facts)
        if container_edits:
            entries.append({"name": name, "containerEdits": container_edits})
    if not entries:
        return None
    return {"cdiVersion": CDI_VERSION, "kind": kind, "devices": entries}
