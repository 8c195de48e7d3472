"""The DaemonSet: daemon flags, vendors, probes, scheduling, rollout and resources."""

from __future__ import annotations

import itertools

import helm_python as helm
import pytest

from hcs_deviceplugin.cli import build_parser
from tests.chart.chart import (
    ALL_ON,
    CASES,
    NAMESPACE,
    VENDORS,
    args,
    container,
    daemonset,
    flag,
    only,
    pod_spec,
    render,
    vendor_values,
)

# Flags the chart passes that `hcs-deviceplugin run` is getting with the observability and API-source
# work; every other flag must be one the current parser knows.

VENDOR_SETS = [c for n in range(1, len(VENDORS) + 1) for c in itertools.combinations(VENDORS, n)]


@pytest.mark.parametrize("enabled", VENDOR_SETS, ids="+".join)
def test_vendors_flag_lists_the_enabled_vendors(enabled: tuple[str, ...]) -> None:
    assert flag(args(vendor_values(*enabled)), "vendors") == ",".join(enabled)


def test_no_vendor_enabled_is_an_error() -> None:
    with pytest.raises(helm.HelmRenderError, match="enable at least one"):
        render(vendor_values())


@pytest.mark.parametrize("case", CASES)
def test_the_daemon_parser_accepts_the_args(case: str) -> None:
    arguments = args(CASES[case])
    assert arguments[0] == "run"
    parsed = build_parser().parse_args(arguments)
    assert parsed.command == "run"
    assert parsed.log_format == "json"
    assert str(parsed.plugin_dir) == "/var/lib/kubelet/device-plugins"
    assert str(parsed.pools_dir) == "/etc/hcs-deviceplugin/pools"


def test_default_args() -> None:
    arguments = args()
    assert flag(arguments, "metrics-port") == "8080"
    assert flag(arguments, "node-name") == "$(NODE_NAME)"
    assert flag(arguments, "pod-resources-interval") == "5"
    assert "--in-cluster" not in arguments
    assert flag(arguments, "kube-namespace") is None
    assert "--node-labels" not in arguments


def test_node_labels_flags() -> None:
    """nodeLabels.enabled passes --node-labels with the API flags it needs (the daemon refuses it alone)."""
    arguments = args({"nodeLabels": {"enabled": True, "gpuTypeLabel": "example.com/gpu-type"}})
    parsed = build_parser().parse_args(arguments)
    assert parsed.node_labels and parsed.in_cluster
    assert parsed.kube_namespace == NAMESPACE
    assert parsed.gpu_type_label == "example.com/gpu-type"


def test_api_source_flags() -> None:
    objects = render({"apiSource": {"inCluster": True}})
    arguments = [
        str(a) for a in only(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    ]
    assert "--in-cluster" in arguments
    assert flag(arguments, "kube-namespace") == NAMESPACE
    selector = flag(arguments, "kube-label-selector")
    assert selector
    wanted = dict(term.split("=", 1) for term in selector.split(","))
    pools = only(objects, "ConfigMap")
    assert wanted.items() <= pools["metadata"]["labels"].items(), (
        "the selector must match the pools ConfigMap"
    )


def test_the_cli_default_label_selector_finds_the_charts_pools_configmap() -> None:
    """``--in-cluster`` without ``--kube-label-selector`` must watch what the chart creates."""
    selector = build_parser().parse_args(["run"]).kube_label_selector
    wanted = dict(term.split("=", 1) for term in selector.split(","))
    pools = only(render({}), "ConfigMap")
    assert wanted.items() <= pools["metadata"]["labels"].items(), (selector, pools["metadata"]["labels"])


def test_api_source_in_another_namespace() -> None:
    values = {
        "apiSource": {
            "inCluster": True,
            "kubeNamespace": "d8-gpu-control-plane",
            "kubeLabelSelector": "app=nvidia-device-plugin",
        }
    }
    objects = render(values)
    arguments = args(values)
    assert flag(arguments, "kube-namespace") == "d8-gpu-control-plane"
    assert flag(arguments, "kube-label-selector") == "app=nvidia-device-plugin"
    assert only(objects, "Role")["metadata"]["namespace"] == "d8-gpu-control-plane"
    assert only(objects, "RoleBinding")["metadata"]["namespace"] == "d8-gpu-control-plane"


def test_backend_options_and_extra_args() -> None:
    values = {"backendOptions": {"nvidia": {"recoverySeconds": "120"}}, "extraArgs": ["--log-level=debug"]}
    arguments = args(values)
    assert "--backend-option=nvidia.recoverySeconds=120" in arguments
    assert arguments[-1] == "--log-level=debug"
    parsed, _ = build_parser().parse_known_args(arguments)
    assert parsed.backend_option == ["nvidia.recoverySeconds=120"]


def test_node_name_from_the_downward_api() -> None:
    env = {e["name"]: e for e in container()["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_probes_hit_healthz_and_readyz_on_the_metrics_port() -> None:
    c = container({"metricsPort": 9400})
    assert c["ports"] == [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert flag(args({"metricsPort": 9400}), "metrics-port") == "9400"
    assert c["livenessProbe"]["failureThreshold"] * c["livenessProbe"]["periodSeconds"] >= 30


def test_resources_have_requests_and_limits() -> None:
    resources = container()["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert "memory" in resources["limits"]


def test_rolling_update_never_surges() -> None:
    strategy = daemonset()["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    custom = daemonset({"updateStrategy": {"maxUnavailable": "10%"}})["spec"]["updateStrategy"]
    assert custom["rollingUpdate"] == {"maxUnavailable": "10%", "maxSurge": 0}


def test_node_critical_priority() -> None:
    assert pod_spec()["priorityClassName"] == "system-node-critical"


def test_scheduling_values_pass_through() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
            }
        }
    }
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec = pod_spec(
        {"nodeSelector": {"node.deckhouse.io/group": "gpu"}, "tolerations": tolerations, "affinity": affinity}
    )
    assert spec["nodeSelector"] == {"node.deckhouse.io/group": "gpu", "kubernetes.io/os": "linux"}
    assert spec["tolerations"] == tolerations
    assert spec["affinity"] == affinity


def test_default_tolerations_reach_tainted_accelerator_nodes() -> None:
    tolerations = pod_spec()["tolerations"]
    assert {"operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_pool_edits_never_restart_the_pods() -> None:
    """No checksum of the pools ConfigMap in the pod template: the daemon applies changes live."""
    template = daemonset(ALL_ON)["spec"]["template"]
    assert not any("checksum" in key for key in template["metadata"].get("annotations", {}))


def test_image_defaults_to_app_version() -> None:
    assert container()["image"] == "hcs-deviceplugin:0.1.0"
    assert container({"image": {"repository": "r.example/hcs", "tag": "v2"}})["image"] == "r.example/hcs:v2"
