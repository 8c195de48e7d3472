"""Operator knobs: namespace, image digest, host network, security context overrides, update strategy,
extra env and volumes. Each one renders what it says, passes strict validation, and refuses bad input."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from tests.chart.chart import (
    ALL_ON,
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    Obj,
    args,
    chart,
    container,
    daemonset,
    flag,
    merge,
    only,
    pod_spec,
    render,
    render_files,
    vendor_values,
)
from tests.chart.test_prometheusrule import PROMETHEUS_RULE_SCHEMA
from tests.chart.test_render import SERVICE_MONITOR_SCHEMA

DIGEST = "sha256:" + "0123456789abcdef" * 4
OTHER_NAMESPACE = "gpu-operators"
SELINUX = {"type": "spc_t", "level": "s0"}

# Every new knob at once, on top of every vendor and every optional object.
EVERY_KNOB: Obj = merge(
    ALL_ON,
    {
        "namespaceOverride": OTHER_NAMESPACE,
        "image": {"repository": "registry.example/hcs", "digest": DIGEST},
        "hostNetwork": True,
        "containerSecurityContext": {"seLinuxOptions": SELINUX},
        "podSecurityContext": {"seLinuxOptions": SELINUX, "supplementalGroups": [44]},
        "updateStrategy": {"type": "OnDelete"},
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}],
        "extraVolumes": [{"name": "ca-bundle", "configMap": {"name": "ca-bundle"}}],
        "extraVolumeMounts": [{"name": "ca-bundle", "mountPath": "/etc/ssl/extra", "readOnly": True}],
        "prometheusRule": {"enabled": True, "seriesSelector": f'namespace="{OTHER_NAMESPACE}"'},
        "networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.0.0.10/32"]}},
    },
)


def test_every_knob_lints_and_every_object_validates() -> None:
    report = helm.lint(CHART, EVERY_KNOB, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    objects = render(EVERY_KNOB)
    assert {"ServiceMonitor", "PrometheusRule", "NetworkPolicy"} <= {o["kind"] for o in objects}
    for obj in objects:
        if obj["kind"] == "ServiceMonitor":
            jsonschema.validate(obj, SERVICE_MONITOR_SCHEMA)
        elif obj["kind"] == "PrometheusRule":
            jsonschema.validate(obj, PROMETHEUS_RULE_SCHEMA)
        else:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


# --- namespaceOverride ---------------------------------------------------------------------------


def test_namespace_override_moves_every_namespaced_object() -> None:
    objects = render(EVERY_KNOB)
    for obj in objects:
        if obj["kind"] in {"ClusterRole", "ClusterRoleBinding"}:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] == OTHER_NAMESPACE, obj["kind"]
    for binding in (o for o in objects if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}):
        assert [s["namespace"] for s in binding["subjects"]] == [OTHER_NAMESPACE]
    monitor = only(objects, "ServiceMonitor")
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [OTHER_NAMESPACE]
    assert flag(args(EVERY_KNOB), "kube-namespace") == OTHER_NAMESPACE
    notes = next(text for path, text in render_files(EVERY_KNOB).items() if path.endswith("NOTES.txt"))
    assert f"-n {OTHER_NAMESPACE} " in notes


def test_api_namespace_still_wins_over_the_namespace_override() -> None:
    values = {
        "namespaceOverride": OTHER_NAMESPACE,
        "apiSource": {"inCluster": True, "kubeNamespace": "pools"},
    }
    objects = render(values)
    assert only(objects, "Role")["metadata"]["namespace"] == "pools"
    assert only(objects, "RoleBinding")["subjects"][0]["namespace"] == OTHER_NAMESPACE


# --- image ---------------------------------------------------------------------------------------


def test_image_digest_pins_the_image() -> None:
    assert container({"image": {"digest": DIGEST}})["image"] == f"hcs-deviceplugin@{DIGEST}"
    pinned = container({"image": {"repository": "r.example/hcs", "tag": "v2", "digest": DIGEST}})
    assert pinned["image"] == f"r.example/hcs@{DIGEST}"


# --- host network ----------------------------------------------------------------------------------


def test_host_network_keeps_cluster_dns() -> None:
    spec = pod_spec({"hostNetwork": True})
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    default = pod_spec()
    assert "hostNetwork" not in default
    assert "dnsPolicy" not in default


# --- security context overrides ------------------------------------------------------------------


def test_container_security_context_override_adds_selinux_and_keeps_the_rest() -> None:
    sc = container({"containerSecurityContext": {"seLinuxOptions": SELINUX}})["securityContext"]
    assert sc["seLinuxOptions"] == SELINUX
    assert sc["privileged"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_container_security_context_override_can_say_false() -> None:
    """A false or empty override replaces the chart's value (a deep merge would drop it silently)."""
    values = {
        "containerSecurityContext": {
            "readOnlyRootFilesystem": False,
            "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
            "seccompProfile": {"type": "Unconfined"},
        }
    }
    sc = container(values)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is False
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert sc["seccompProfile"] == {"type": "Unconfined"}


def test_container_security_context_override_on_a_privileged_vendor() -> None:
    values = merge(vendor_values("ascend"), {"containerSecurityContext": {"seLinuxOptions": SELINUX}})
    sc = container(values)["securityContext"]
    assert sc["privileged"] is True
    assert sc["seLinuxOptions"] == SELINUX
    assert "allowPrivilegeEscalation" not in sc
    kubernetes_validate.validate(daemonset(values), KUBE_VERSION, strict=True)


def test_privileged_with_no_escalation_fails_with_a_clear_error() -> None:
    values = merge(vendor_values("ascend"), {"containerSecurityContext": {"allowPrivilegeEscalation": False}})
    with pytest.raises(helm.HelmRenderError, match=r"allowPrivilegeEscalation=false conflicts"):
        render(values)


def test_pod_security_context_override() -> None:
    spec = pod_spec({"podSecurityContext": {"seLinuxOptions": SELINUX, "fsGroup": 0}})
    assert spec["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "seLinuxOptions": SELINUX,
        "fsGroup": 0,
    }


# --- update strategy -------------------------------------------------------------------------------


def test_on_delete_update_strategy() -> None:
    assert daemonset({"updateStrategy": {"type": "OnDelete"}})["spec"]["updateStrategy"] == {
        "type": "OnDelete"
    }


# --- extra env and volumes -------------------------------------------------------------------------


def test_extra_env_and_volumes_reach_the_pod() -> None:
    spec = pod_spec(EVERY_KNOB)
    env = spec["containers"][0]["env"]
    assert env[-1] == {"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}
    assert env[0]["name"] == "NODE_NAME", "the chart's own variables come first"
    assert spec["volumes"][-1] == {"name": "ca-bundle", "configMap": {"name": "ca-bundle"}}
    mounts = spec["containers"][0]["volumeMounts"]
    assert mounts[-1] == {"name": "ca-bundle", "mountPath": "/etc/ssl/extra", "readOnly": True}


# --- the schema refuses what the knobs cannot take -------------------------------------------------

BAD_KNOBS: dict[str, dict[str, Any]] = {
    "digest without algorithm": {"image": {"digest": "0123456789abcdef" * 4}},
    "short digest": {"image": {"digest": "sha256:abc"}},
    "namespace with capitals": {"namespaceOverride": "GPU"},
    "host network as a string": {"hostNetwork": "true"},
    "privileged through the override": {"containerSecurityContext": {"privileged": True}},
    "unknown container security field": {"containerSecurityContext": {"seLinux": SELINUX}},
    "unknown SELinux field": {"containerSecurityContext": {"seLinuxOptions": {"kind": "spc_t"}}},
    "unknown pod security field": {"podSecurityContext": {"hostNetwork": True}},
    "negative fsGroup": {"podSecurityContext": {"fsGroup": -1}},
    "update strategy type": {"updateStrategy": {"type": "Recreate"}},
    "env without a name": {"extraEnv": [{"value": "x"}]},
    "volume without a name": {"extraVolumes": [{"emptyDir": {}}]},
    "relative volume mount": {"extraVolumeMounts": [{"name": "x", "mountPath": "etc/x"}]},
    "series selector without quotes": {"prometheusRule": {"seriesSelector": "namespace=hcs"}},
    "series selector with braces": {"prometheusRule": {"seriesSelector": '{namespace="hcs"}'}},
    "unknown alert disabled": {"prometheusRule": {"disabled": ["HcsGpuOnFire"]}},
    "alert label not a string": {"prometheusRule": {"alertLabels": {"page": True}}},
}


@pytest.mark.parametrize("name", BAD_KNOBS)
def test_bad_knobs_are_rejected(name: str) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart().validate_schema(chart().merge_values(BAD_KNOBS[name]))


def test_every_knob_passes_the_schema() -> None:
    chart().validate_schema(chart().merge_values(EVERY_KNOB))
