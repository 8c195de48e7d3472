"""The chart's DRA mode: off by default; on, the daemon gets its flags, the kubelet plugin
directories and the API, a ClusterRole for ResourceSlices and claims, and one DeviceClass per
``api: dra`` pool whose CEL selector names our driver and the pool attribute the daemon publishes."""

from __future__ import annotations

import kubernetes_validate  # type: ignore[import-untyped]

from tests.chart.chart import KUBE_VERSION, Obj, args, flag, merge, pod_spec, render

DRA_ON: Obj = {
    "dra": {"enabled": True, "extraPools": ["elsewhere"]},
    "pools": {
        "config": {
            "version": "v1",
            "pools": [
                {"name": "team-a", "devices": [{"uuid": "GPU-1"}]},
                {"name": "train", "api": "dra", "devices": [{"uuid": "GPU-2"}]},
            ],
        }
    },
}


def test_dra_is_off_by_default() -> None:
    objects = render()
    assert not [o for o in objects if o["kind"] == "DeviceClass"]
    assert not [o for o in objects if o["metadata"]["name"].endswith("-dra")]
    assert flag(args(), "dra-driver") is None
    assert not [v for v in pod_spec()["volumes"] if v["name"].startswith("dra-")]


def test_dra_on_passes_the_flags_mounts_and_turns_the_api_on() -> None:
    arguments = args(DRA_ON)
    assert flag(arguments, "dra-driver") == "gpu.deckhouse.io"
    assert flag(arguments, "dra-plugins-dir") == "/var/lib/kubelet/plugins"
    assert flag(arguments, "dra-registry-dir") == "/var/lib/kubelet/plugins_registry"
    assert "--in-cluster" in arguments
    spec = pod_spec(DRA_ON)
    assert spec["automountServiceAccountToken"] is True
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if v["name"].startswith("dra-")}
    assert volumes == {
        "dra-plugins": "/var/lib/kubelet/plugins",
        "dra-registry": "/var/lib/kubelet/plugins_registry",
    }
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["dra-plugins"] == "/var/lib/kubelet/plugins"
    assert mounts["dra-registry"] == "/var/lib/kubelet/plugins_registry"


def test_dra_rbac_covers_slices_claims_and_reading_nodes_only() -> None:
    (role,) = [
        o for o in render(DRA_ON) if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-dra")
    ]
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    assert rules == {
        (("resource.k8s.io",), ("resourceslices",)): {"get", "list", "watch", "create", "update", "delete"},
        (("resource.k8s.io",), ("resourceclaims",)): {"get"},
        (("",), ("nodes",)): {"get"},  # the Node's uid for the slices' owner reference
    }
    bindings = [
        o
        for o in render(DRA_ON)
        if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"].endswith("-dra")
    ]
    assert bindings and bindings[0]["roleRef"]["name"] == role["metadata"]["name"]


def test_one_device_class_per_dra_pool_selecting_on_driver_and_pool() -> None:
    classes = {o["metadata"]["name"]: o for o in render(DRA_ON) if o["kind"] == "DeviceClass"}
    assert set(classes) == {"train.gpu.deckhouse.io", "elsewhere.gpu.deckhouse.io"}
    expression = classes["train.gpu.deckhouse.io"]["spec"]["selectors"][0]["cel"]["expression"]
    assert (
        expression
        == 'device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].pool == "train"'
    )
    for device_class in classes.values():
        kubernetes_validate.validate(device_class, KUBE_VERSION, strict=True)


def test_another_driver_name_reaches_flag_and_classes() -> None:
    values = merge(DRA_ON, {"dra": {"driver": "npu.example.com"}})
    assert flag(args(values), "dra-driver") == "npu.example.com"
    names = {o["metadata"]["name"] for o in render(values) if o["kind"] == "DeviceClass"}
    assert names == {"train.npu.example.com", "elsewhere.npu.example.com"}
