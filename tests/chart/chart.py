"""Render ``charts/hcs-deviceplugin`` with Helm's own engine and hand the objects to tests.

The engine is Helm v4's Go SDK, embedded as a shared library by ``helm-python-sdk`` (import name
``helm_python``): the same template functions, values coalescing and ``values.schema.json`` check as
``helm template``, with no helm binary and no cluster.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "hcs-deviceplugin"
RELEASE = "hcs-deviceplugin"
NAMESPACE = "hcs-system"
VENDORS = ("nvidia", "ascend", "hygon", "cambricon")
# The Kubernetes version whose schemas the objects must satisfy (the newest kubernetes-validate ships).
KUBE_VERSION = "1.37.0"

Obj = dict[str, Any]


def vendor_values(*enabled: str) -> Obj:
    """Values that enable exactly ``enabled`` among the four vendors."""
    return {"vendors": {name: {"enabled": name in enabled} for name in VENDORS}}


ALL_ON: Obj = {
    **vendor_values(*VENDORS),
    "serviceMonitor": {"enabled": True},
    "nodeLabels": {"enabled": True},
    "apiSource": {"inCluster": True},
}

DRA_ON: Obj = {
    "dra": {"enabled": True},
    "pools": {
        "config": {"version": "v1", "pools": [{"name": "train", "api": "dra", "devices": [{"uuid": "G"}]}]}
    },
}

CASES: dict[str, Obj] = {"default": {}, "all-vendors": ALL_ON, "dra": DRA_ON}


def merge(base: Obj, override: Obj) -> Obj:
    """Deep merge of two values trees (maps merge, anything else is replaced), like ``-f a -f b``."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


@functools.cache
def _load() -> helm.Chart:
    return helm.Chart.load(CHART)


def chart() -> helm.Chart:
    """The loaded chart (one native handle for the whole session)."""
    return _load()


@functools.lru_cache(maxsize=64)
def _render(values_json: str) -> tuple[tuple[str, str], ...]:
    rendered = chart().render(json.loads(values_json), name=RELEASE, namespace=NAMESPACE)
    return tuple(sorted(rendered.items()))


def render_files(values: Obj | None = None) -> dict[str, str]:
    """Template path → rendered text, as ``helm template`` would print them."""
    return dict(_render(json.dumps(values or {}, sort_keys=True)))


def render(values: Obj | None = None) -> list[Obj]:
    """Every object the chart renders with ``values`` (a fresh copy each call)."""
    objects: list[Obj] = []
    for path, text in render_files(values).items():
        if not path.endswith((".yaml", ".yml")):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def only(objects: list[Obj], kind: str) -> Obj:
    """The one object of ``kind``; fails when there is none or more than one."""
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def kinds(objects: list[Obj]) -> list[str]:
    return sorted(o["kind"] for o in objects)


def daemonset(values: Obj | None = None) -> Obj:
    return only(render(values), "DaemonSet")


def pod_spec(values: Obj | None = None) -> Obj:
    spec: Obj = daemonset(values)["spec"]["template"]["spec"]
    return spec


def container(values: Obj | None = None) -> Obj:
    containers: list[Obj] = pod_spec(values)["containers"]
    assert len(containers) == 1
    return containers[0]


def args(values: Obj | None = None) -> list[str]:
    return [str(a) for a in container(values)["args"]]


def flag(arguments: list[str], name: str) -> str | None:
    """The value of ``--name=value`` in ``arguments`` (None when absent)."""
    prefix = f"--{name}="
    values = [a.removeprefix(prefix) for a in arguments if a.startswith(prefix)]
    assert len(values) <= 1, f"--{name} given {len(values)} times"
    return values[0] if values else None


def host_mounts(values: Obj | None = None) -> dict[str, tuple[str, bool]]:
    """Host path → (container mount path, read-only) for every hostPath volume of the pod."""
    spec = pod_spec(values)
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    out: dict[str, tuple[str, bool]] = {}
    for mount in spec["containers"][0]["volumeMounts"]:
        if mount["name"] in host_paths:
            out[host_paths[mount["name"]]] = (mount["mountPath"], bool(mount.get("readOnly", False)))
    return out
