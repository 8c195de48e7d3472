"""RBAC: read the pool ConfigMaps and write Events in one namespace; nodes only when asked."""

from __future__ import annotations

from tests.chart.chart import ALL_ON, NAMESPACE, Obj, only, pod_spec, render


def _rules(role: Obj) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) → verbs."""
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_role_reads_configmaps_and_writes_events() -> None:
    role = only(render(), "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert _rules(role) == {
        ("", "configmaps"): {"get", "list", "watch"},
        ("", "events"): {"create", "patch"},
        ("events.k8s.io", "events"): {"create", "patch"},
    }


def test_no_wildcards_and_no_secrets() -> None:
    for obj in render(ALL_ON):
        for rule in obj.get("rules", []):
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], (obj["kind"], rule)
            assert "secrets" not in rule["resources"]


def test_role_binding_names_the_pods_service_account() -> None:
    objects = render()
    binding, role = only(objects, "RoleBinding"), only(objects, "Role")
    account = only(objects, "ServiceAccount")["metadata"]["name"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    assert pod_spec()["serviceAccountName"] == account


def test_no_cluster_role_unless_node_labels() -> None:
    kinds = {o["kind"] for o in render({"apiSource": {"inCluster": True}})}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}


def test_node_labels_cluster_role_patches_nodes_only() -> None:
    objects = render({"nodeLabels": {"enabled": True}})
    role, binding = only(objects, "ClusterRole"), only(objects, "ClusterRoleBinding")
    assert _rules(role) == {("", "nodes"): {"get", "patch"}}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = only(objects, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


def test_rbac_can_be_left_to_the_cluster_admin() -> None:
    values = {
        "rbac": {"create": False},
        "serviceAccount": {"create": False, "name": "gpu-agent"},
        "nodeLabels": {"enabled": True},
    }
    objects = render(values)
    assert {o["kind"] for o in objects} == {"ConfigMap", "DaemonSet", "Service"}
    assert pod_spec(values)["serviceAccountName"] == "gpu-agent"


def test_watch_node_reads_nodes_and_turns_the_api_on() -> None:
    objects = render({"apiSource": {"watchNode": True}})
    role, binding = only(objects, "ClusterRole"), only(objects, "ClusterRoleBinding")
    assert _rules(role) == {("", "nodes"): {"get", "list", "watch"}}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    spec = pod_spec({"apiSource": {"watchNode": True}})
    assert spec["automountServiceAccountToken"] is True
    arguments = spec["containers"][0]["args"]
    assert "--watch-node" in arguments and "--in-cluster" in arguments
    both = render({"apiSource": {"watchNode": True}, "nodeLabels": {"enabled": True}})
    assert len([o for o in both if o["kind"] == "ClusterRole"]) == 2
