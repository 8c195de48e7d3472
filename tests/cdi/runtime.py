"""What a container runtime does with a CDI directory, so tests can check our specs the way it will.

The CDI library in containerd and CRI-O loads every ``*.json``/``*.yaml`` file of the directory,
refuses a spec that is not valid, indexes devices by ``<kind>=<name>``, refuses a name two specs both
define, and for a container applies the spec-level edits of each spec it uses once and then each
requested device's edits: environment appended (a later value of a variable wins), device nodes and
mounts replacing any earlier one at the same container path. :class:`CdiRegistry` does that, after
checking each file against the vendored JSON schema and the grammar of SPEC.md that the schema does
not encode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

SCHEMA_DIR = Path(__file__).parent / "schema"
KNOWN_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0")
KIND = re.compile(
    r"(?P<vendor>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)"
    r"/(?P<class>[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?)"
)
DEVICE_NAME = re.compile(r"[A-Za-z0-9]([-_.:A-Za-z0-9]*[A-Za-z0-9])?")
NODE_TYPES = ("b", "c", "u", "p")

Spec = dict[str, Any]


class InvalidSpec(Exception):
    """A spec file a runtime would refuse."""


class UnresolvedDevice(Exception):
    """A CDI name no spec in the directory defines (the container would fail to start)."""


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads((SCHEMA_DIR / "schema.json").read_text())
    defs = json.loads((SCHEMA_DIR / "defs.json").read_text())
    registry: Registry[Any] = Registry().with_resource(
        "defs.json", Resource.from_contents(defs, default_specification=DRAFT7)
    )
    return jsonschema.Draft7Validator(schema, registry=registry)


VALIDATOR = _validator()


def validate_spec(spec: object, where: str = "spec") -> Spec:
    """``spec`` if a runtime would load it; InvalidSpec saying why otherwise."""
    errors = sorted(VALIDATOR.iter_errors(spec), key=lambda e: list(e.path))
    if errors:
        raise InvalidSpec(f"{where}: {errors[0].message} at {list(errors[0].path)}")
    assert isinstance(spec, dict)
    problems = []
    if spec["cdiVersion"] not in KNOWN_VERSIONS:
        problems.append(f"unknown cdiVersion {spec['cdiVersion']!r}")
    if not KIND.fullmatch(spec["kind"]):
        problems.append(f"kind {spec['kind']!r} is not vendor.com/class")
    if not spec["devices"]:
        problems.append("no devices")
    names = [d["name"] for d in spec["devices"]]
    if len(set(names)) != len(names):
        problems.append(f"device names repeat: {names}")
    for device in spec["devices"]:
        if not DEVICE_NAME.fullmatch(device["name"]):
            problems.append(f"device name {device['name']!r} is not a CDI name")
        edits = device["containerEdits"]
        if not any(edits.get(k) for k in ("env", "deviceNodes", "mounts", "hooks")):
            problems.append(f"device {device['name']!r} has no edits")
        for node in edits.get("deviceNodes", []):
            if not node["path"].startswith("/") or not node.get("hostPath", node["path"]).startswith("/"):
                problems.append(f"device node {node} is not absolute")
            if "type" in node and node["type"] not in NODE_TYPES:
                problems.append(f"device node type {node['type']!r}")
            if node.get("type") in ("b", "c") and ("major" not in node or "minor" not in node):
                problems.append(f"device node {node['path']} has a type but no numbers")
        for mount in edits.get("mounts", []):
            if not mount["containerPath"].startswith("/"):
                problems.append(f"mount {mount} is not absolute")
    if problems:
        raise InvalidSpec(f"{where}: " + "; ".join(problems))
    return spec


@dataclass
class ContainerState:
    """What the runtime adds to a container's OCI spec."""

    env: dict[str, str] = field(default_factory=dict)
    device_nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    mounts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply(self, edits: Mapping[str, Any]) -> None:
        for entry in edits.get("env", []):
            key, _, value = entry.partition("=")
            self.env[key] = value
        for node in edits.get("deviceNodes", []):
            self.device_nodes[node["path"]] = node
        for mount in edits.get("mounts", []):
            self.mounts[mount["containerPath"]] = mount


@dataclass
class CdiRegistry:
    specs: dict[Path, Spec]
    devices: dict[str, tuple[Path, dict[str, Any]]]

    @staticmethod
    def load(directory: Path) -> CdiRegistry:
        specs: dict[Path, Spec] = {}
        devices: dict[str, tuple[Path, dict[str, Any]]] = {}
        for path in sorted(directory.iterdir()):
            if path.suffix not in (".json", ".yaml") or not path.is_file():
                continue
            text = path.read_text()
            raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
            spec = validate_spec(raw, str(path))
            specs[path] = spec
            for device in spec["devices"]:
                name = f"{spec['kind']}={device['name']}"
                if name in devices:
                    raise InvalidSpec(f"{name} is defined by {devices[name][0]} and {path}")
                devices[name] = (path, device)
        return CdiRegistry(specs, devices)

    def resolve(self, names: Iterable[str]) -> ContainerState:
        wanted = list(names)
        missing = [n for n in wanted if n not in self.devices]
        if missing:
            raise UnresolvedDevice(f"unresolvable CDI devices {missing}")
        state = ContainerState()
        for path in dict.fromkeys(self.devices[n][0] for n in wanted):
            state.apply(self.specs[path].get("containerEdits", {}))
        for name in wanted:
            state.apply(self.devices[name][1]["containerEdits"])
        return state


def annotation_names(annotations: Mapping[str, str]) -> list[str]:
    """The CDI names in ``cdi.k8s.io/`` annotations, as the runtime parses them."""
    names: list[str] = []
    for key, value in annotations.items():
        if key.startswith("cdi.k8s.io/"):
            names += [n.strip() for n in value.split(",") if n.strip()]
    return names
