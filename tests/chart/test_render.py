"""The chart lints, renders the expected objects, and every object is valid for Kubernetes 1.37."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from tests.chart.chart import (
    ALL_ON,
    CASES,
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    VENDORS,
    Obj,
    kinds,
    only,
    render,
    vendor_values,
)

DEFAULT_KINDS = ["ConfigMap", "DaemonSet", "Role", "RoleBinding", "Service", "ServiceAccount"]
ALL_ON_KINDS = sorted([*DEFAULT_KINDS, "ClusterRole", "ClusterRoleBinding", "ServiceMonitor"])
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "DeviceClass"}

# The part of the ServiceMonitor CRD (monitoring.coreos.com/v1) the chart uses. The CRD is not among
# the core schemas, so its shape is checked here: the fields, their types, and nothing unknown.
_DURATION = {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _LABELS},
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": _LABELS},
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["port"],
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": _DURATION,
                            "scrapeTimeout": _DURATION,
                            "relabelings": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "sourceLabels": {"type": "array", "items": {"type": "string"}},
                                        "targetLabel": {"type": "string"},
                                        "action": {"enum": ["replace", "keep", "drop", "labelmap"]},
                                        "regex": {"type": "string"},
                                        "replacement": {"type": "string"},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize("case", CASES)
def test_lint_is_clean(case: str) -> None:
    report = helm.lint(CHART, CASES[case], strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []


def test_default_render_objects() -> None:
    assert kinds(render()) == DEFAULT_KINDS


def test_all_vendors_render_objects() -> None:
    assert kinds(render(ALL_ON)) == ALL_ON_KINDS


@pytest.mark.parametrize("case", CASES)
def test_every_object_validates(case: str) -> None:
    for obj in render(CASES[case]):
        if obj["kind"] == "ServiceMonitor":
            jsonschema.validate(obj, SERVICE_MONITOR_SCHEMA)
        else:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("vendor", VENDORS)
def test_each_vendor_alone_lints_and_validates(vendor: str) -> None:
    values = vendor_values(vendor)
    assert helm.lint(CHART, values, strict=True, namespace=NAMESPACE)["errors"] == []
    for obj in render(values):
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("case", CASES)
def test_namespaced_objects_are_in_the_release_namespace(case: str) -> None:
    for obj in render(CASES[case]):
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in CLUSTER_SCOPED:
            assert namespace is None, obj["kind"]
        else:
            assert namespace == NAMESPACE, obj["kind"]


def test_validation_catches_a_broken_object() -> None:
    """The validator really checks: a wrong type in a DaemonSet is reported."""
    broken: Obj = only(render(), "DaemonSet")
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSION, strict=True)
    unknown: Obj = only(render(), "DaemonSet")
    unknown["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privilegd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, KUBE_VERSION, strict=True)


def test_service_monitor_scrapes_the_metrics_service() -> None:
    objects = render(ALL_ON)
    monitor, service = only(objects, "ServiceMonitor"), only(objects, "Service")
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert ports == {"metrics"}
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_service_selects_the_daemon_pods() -> None:
    objects = render()
    service, ds = only(objects, "Service"), only(objects, "DaemonSet")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_service_monitor_without_service_fails() -> None:
    with pytest.raises(helm.HelmRenderError, match=r"service\.enabled"):
        render({"serviceMonitor": {"enabled": True}, "service": {"enabled": False}})


def test_notes_render() -> None:
    from tests.chart.chart import render_files

    notes = next(text for path, text in render_files(ALL_ON).items() if path.endswith("NOTES.txt"))
    assert "nvidia,ascend,hygon,cambricon" in notes
    assert "privileged" in notes
