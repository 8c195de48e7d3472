"""A ResourceSlice checked as the 1.37 apiserver would: the vendored 1.37 JSON schema (strict, from
kubernetes-validate) plus the validation rules the schema cannot express (limits, name formats, one
value per attribute), from the API reference of ``resource.k8s.io/v1``."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]

KUBE_VERSION = "1.37.0"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]")
ATTRIBUTE_KINDS = ("bool", "int", "string", "version")
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")


def _qualified(name: str) -> bool:
    domain, _, ident = name.rpartition("/")
    return (not domain or (len(domain) <= 63 and _DNS_SUBDOMAIN.fullmatch(domain) is not None)) and (
        _C_IDENTIFIER.fullmatch(ident) is not None
    )


def problems(obj: dict[str, Any]) -> list[str]:
    found: list[str] = []
    try:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    except Exception as exc:  # ValidationError, or an unknown kind/version
        found.append(f"schema: {exc}")
        return found
    spec = obj["spec"]
    if not _DNS_SUBDOMAIN.fullmatch(spec["driver"]) or len(spec["driver"]) > 63:
        found.append(f"driver {spec['driver']!r} is not a DNS subdomain of at most 63 characters")
    placement = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(placement) != 1:
        found.append(f"exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection: {placement}")
    pool = spec["pool"]
    if pool["resourceSliceCount"] < 1 or pool["generation"] < 0:
        found.append(f"pool {pool}: resourceSliceCount ≥ 1 and generation ≥ 0")
    devices = spec.get("devices", [])
    tainted = any(d.get("taints") for d in devices)
    if len(devices) > (64 if tainted else 128):
        found.append(f"{len(devices)} devices: at most {64 if tainted else 128}")
    names = [d["name"] for d in devices]
    if len(set(names)) != len(names):
        found.append("device names are not unique")
    for device in devices:
        where = f"device {device['name']!r}"
        if not _DNS_LABEL.fullmatch(device["name"]):
            found.append(f"{where}: name is not a DNS label")
        attributes, capacity = device.get("attributes", {}), device.get("capacity", {})
        if len(attributes) + len(capacity) > 32:
            found.append(f"{where}: more than 32 attributes and capacities")
        for name, value in attributes.items():
            if not _qualified(name):
                found.append(f"{where}: attribute name {name!r} is not a qualified C identifier")
            kinds = [k for k in ATTRIBUTE_KINDS if k in value]
            if len(kinds) != 1:
                found.append(f"{where}: attribute {name} must have exactly one value, has {kinds}")
            elif kinds == ["string"] and len(value["string"]) > 64:
                found.append(f"{where}: attribute {name} longer than 64 characters")
        for name in capacity:
            if not _qualified(name):
                found.append(f"{where}: capacity name {name!r} is not a qualified C identifier")
        for taint in device.get("taints", []):
            prefix, _, key = taint["key"].rpartition("/")
            if not _LABEL_NAME.fullmatch(key) or (prefix and not _DNS_SUBDOMAIN.fullmatch(prefix)):
                found.append(f"{where}: taint key {taint['key']!r} is not a label name")
            if taint["effect"] not in TAINT_EFFECTS:
                found.append(f"{where}: taint effect {taint['effect']!r}")
    return found
