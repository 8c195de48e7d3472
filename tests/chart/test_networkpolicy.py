"""The optional NetworkPolicy: the metrics port in, the Kubernetes API out when used, nothing else."""

from __future__ import annotations

import helm_python as helm
import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from tests.chart.chart import KUBE_VERSION, Obj, chart, kinds, merge, only, render

ON: Obj = {"networkPolicy": {"enabled": True}}
API = ["10.0.0.10/32", "10.0.0.11/32"]
PROMETHEUS = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]


def _policy(values: Obj) -> Obj:
    objects = render(values)
    policy = only(objects, "NetworkPolicy")
    kubernetes_validate.validate(policy, KUBE_VERSION, strict=True)
    pod_labels = only(objects, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    return policy


def test_no_policy_by_default() -> None:
    assert "NetworkPolicy" not in kinds(render())


def test_metrics_in_and_nothing_out_without_the_api() -> None:
    spec = _policy(merge(ON, {"metricsPort": 9400}))["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [{"ports": [{"port": 9400, "protocol": "TCP"}]}]
    assert spec["egress"] == []


def test_metrics_only_from_the_given_peers() -> None:
    spec = _policy(merge(ON, {"networkPolicy": {"metricsFrom": PROMETHEUS}}))["spec"]
    assert spec["ingress"][0]["from"] == PROMETHEUS


@pytest.mark.parametrize("api", [{"apiSource": {"inCluster": True}}, {"nodeLabels": {"enabled": True}}])
def test_egress_to_the_api_server_when_the_daemon_uses_it(api: Obj) -> None:
    values = merge(merge(ON, api), {"networkPolicy": {"apiServer": {"cidrs": API, "ports": [6443, 443]}}})
    spec = _policy(values)["spec"]
    assert spec["egress"] == [
        {
            "to": [{"ipBlock": {"cidr": cidr}} for cidr in API],
            "ports": [{"port": 6443, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}],
        }
    ]


def test_api_use_without_api_addresses_fails_clearly() -> None:
    with pytest.raises(helm.HelmRenderError, match=r"networkPolicy\.apiServer\.cidrs is empty"):
        render(merge(ON, {"apiSource": {"inCluster": True}}))


@pytest.mark.parametrize(
    "bad",
    [
        {"networkPolicy": {"apiServer": {"cidrs": ["10.0.0.10"]}}},
        {"networkPolicy": {"apiServer": {"ports": [0]}}},
        {"networkPolicy": {"apiServer": {"ports": []}}},
        {"networkPolicy": {"metricsFrom": [{}]}},
        {"networkPolicy": {"enabled": "yes"}},
    ],
)
def test_bad_policy_values_are_rejected(bad: Obj) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart().validate_schema(chart().merge_values(bad))
