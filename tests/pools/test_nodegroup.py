"""The DKP NodeGroup format: DKP's rendered ConfigMap, the node label that picks a config, and errors.

Fixtures in ``tests/pools/nodegroup/`` are what node-manager renders (``templates/nvidia-gpu/
plugin_config.yaml``): the current four keys and an older rendering (``MIG``, no ``MPS``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from hcs_deviceplugin.model import DeviceDelivery, DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.formats import Format, detect_format, parse_configmap
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.nodegroup import (
    GPU_SELECTOR,
    MIG_CONFIG_LABEL,
    NODE_CONFIG_LABEL,
    NODE_GROUP_LABEL,
    nodegroup_hash,
    parse_every_config,
)
from hcs_deviceplugin.pools.objects import ConfigMapObject
from hcs_deviceplugin.pools.shapes import is_nodegroup_config

FIXTURES = Path(__file__).parent / "nodegroup"
NO_ENV: dict[str, str] = {}
DEFAULT_OPTIONS = {"passDeviceSpecs": "true", "deviceListStrategy": "envvar", "deviceIDStrategy": "uuid"}


def fixture(name: str = "rendered.yaml") -> ConfigMapObject:
    manifest = yaml.safe_load((FIXTURES / name).read_text())
    meta = manifest["metadata"]
    return ConfigMapObject(
        name=meta["name"],
        namespace=meta["namespace"],
        data=manifest["data"],
        labels=meta["labels"],
        resource_version="7",
        source=f"configmap {meta['namespace']}/{meta['name']}",
    )


def node(**labels: str) -> NodeContext:
    return NodeContext("k8s-w1", labels, origin="test")


def picked(config: str, **labels: str) -> NodeContext:
    return node(**{NODE_CONFIG_LABEL: config, NODE_GROUP_LABEL: "worker-gpu", **labels})


def parse(obj: ConfigMapObject, context: NodeContext, env: dict[str, str] | None = None) -> list[Pool]:
    return parse_configmap(obj, NO_ENV if env is None else env, context)


def gpu_pool(source: str, **fields: object) -> Pool:
    values: dict[str, object] = {
        "name": "nvidia-gpu",
        "resource_name": "nvidia.com/gpu",
        "devices": (GPU_SELECTOR,),
        "source": source,
    }
    values.update(fields)
    values["options"] = {**DEFAULT_OPTIONS, **dict(values.get("options", {}))}  # type: ignore[call-overload]
    return Pool(**values)  # type: ignore[arg-type]


SOURCE = "configmap d8-nvidia-gpu/nvidia-device-plugin-32da4e7"


@pytest.mark.parametrize(
    ("config", "labels", "expected"),
    [
        pytest.param(
            "Exclusive", {}, gpu_pool(SOURCE, options={"migStrategy": "none"}), id="exclusive-whole-cards"
        ),
        pytest.param(
            "TimeSlicing",
            {},
            gpu_pool(SOURCE, slices_per_unit=4, options={"migStrategy": "none"}),
            id="time-slicing-4-replicas",
        ),
        pytest.param(
            "Mig", {}, gpu_pool(SOURCE, options={"migStrategy": "mixed"}), id="mig-without-layout-whole-cards"
        ),
        pytest.param(
            "Mig",
            {MIG_CONFIG_LABEL: "all-disabled"},
            gpu_pool(SOURCE, options={"migStrategy": "mixed"}),
            id="mig-layout-disabled",
        ),
        pytest.param(
            "Mig",
            {MIG_CONFIG_LABEL: "all-1g.10gb"},
            gpu_pool(
                SOURCE,
                name="nvidia-mig-1g-10gb",
                resource_name="nvidia.com/mig-1g.10gb",
                unit=UnitKind.PARTITION,
                profile="1g.10gb",
                options={"migStrategy": "mixed"},
            ),
            id="mig-all-one-profile",
        ),
        pytest.param(
            "Mig",
            {MIG_CONFIG_LABEL: "all-1g.10gb+me"},
            gpu_pool(
                SOURCE,
                name="nvidia-mig-1g-10gb-me",
                resource_name="nvidia.com/mig-1g.10gb.me",
                unit=UnitKind.PARTITION,
                profile="1g.10gb+me",
                options={"migStrategy": "mixed"},
            ),
            id="mig-media-extension-profile",
        ),
    ],
)
def test_the_rendered_configmap_gives_upstreams_resources_for_the_labelled_config(
    config: str, labels: dict[str, str], expected: Pool
) -> None:
    assert parse(fixture(), picked(config, **labels)) == [expected]


def test_mps_is_a_pool_shared_by_mps_with_the_replicas() -> None:
    assert parse(fixture(), picked("MPS")) == [
        gpu_pool(SOURCE, slices_per_unit=4, sharing="mps", options={"migStrategy": "none"})
    ]


def test_mps_with_one_replica_is_an_error() -> None:
    text = "version: v1\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 1}]\n"
    with pytest.raises(ConfigErrors) as caught:
        parse(ConfigMapObject(name="ng", data={"MPS": text}), node(**{NODE_CONFIG_LABEL: "MPS"}))
    assert [e.path for e in caught.value.errors] == ["MPS: sharing.mps"]


def test_an_older_rendering_with_a_mig_key_and_eight_replicas() -> None:
    older = fixture("rendered-older.yaml")
    context = node(**{NODE_CONFIG_LABEL: "TimeSlicing", NODE_GROUP_LABEL: "gpu-a100"})
    assert [p.slices_per_unit for p in parse(older, context)] == [8]
    mig = node(**{NODE_CONFIG_LABEL: "MIG", NODE_GROUP_LABEL: "gpu-a100", MIG_CONFIG_LABEL: "all-3g.40gb"})
    assert [p.resource_name for p in parse(older, mig)] == ["nvidia.com/mig-3g.40gb"]


@pytest.mark.parametrize("spelling", ["time-slicing", "timeSlicing", "timeslicing", "Time_Slicing"])
def test_a_label_spelled_otherwise_picks_the_config_with_a_warning(
    spelling: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        pools = parse(fixture(), picked(spelling))
    assert [p.slices_per_unit for p in pools] == [4]
    assert f"{NODE_CONFIG_LABEL}={spelling} names no config exactly; using TimeSlicing" in caplog.text


def test_the_older_mig_key_is_found_by_the_current_label_value() -> None:
    older = fixture("rendered-older.yaml")
    context = node(**{NODE_CONFIG_LABEL: "Mig", NODE_GROUP_LABEL: "gpu-a100"})
    assert [p.options["migStrategy"] for p in parse(older, context)] == ["mixed"]


def test_a_label_naming_no_config_is_an_error_that_lists_the_configs() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse(fixture(), picked("Shared"))
    [error] = caught.value.errors
    assert error.source == SOURCE
    assert error.message == (
        f"the node label {NODE_CONFIG_LABEL}=Shared names no config here "
        "(configs: Exclusive, MPS, Mig, TimeSlicing)"
    )


def test_without_the_label_a_single_config_is_used_as_upstreams_fallback() -> None:
    one = ConfigMapObject(
        name="nvidia-device-plugin-32da4e7", data={"TimeSlicing": fixture().data["TimeSlicing"]}
    )
    assert [p.slices_per_unit for p in parse(one, node())] == [4]


@pytest.mark.parametrize(
    ("context", "why"),
    [
        (NodeContext("k8s-w1"), "the node's labels are not known"),
        (node(), f"node k8s-w1 has no label {NODE_CONFIG_LABEL}"),
    ],
)
def test_without_the_label_several_configs_are_an_error_that_says_why(context: NodeContext, why: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse(fixture(), context)
    [error] = caught.value.errors
    assert error.message.startswith(why)
    assert "Exclusive, MPS, Mig, TimeSlicing" in error.message


def test_another_nodegroups_configmap_gives_no_pools_and_no_error() -> None:
    other = node(**{NODE_CONFIG_LABEL: "Exclusive", NODE_GROUP_LABEL: "gpu-a100"})
    assert parse(fixture(), other) == []
    assert nodegroup_hash("worker-gpu") == "32da4e7"


def test_a_mig_layout_with_several_profiles_per_card_is_an_error() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse(fixture(), picked("Mig", **{MIG_CONFIG_LABEL: "all-balanced"}))
    [error] = caught.value.errors
    assert error.path == "Mig: flags.migStrategy"
    assert "all-balanced is not all-<profile>" in error.message


def test_single_strategy_serves_the_profile_as_nvidia_gpu() -> None:
    obj = ConfigMapObject(name="ng", data={"Mig": "version: v1\nflags: {migStrategy: single}\n"})
    [pool] = parse(obj, node(**{NODE_CONFIG_LABEL: "Mig", MIG_CONFIG_LABEL: "all-2g.20gb"}))
    assert (pool.resource_name, pool.unit, pool.profile) == ("nvidia.com/gpu", UnitKind.PARTITION, "2g.20gb")


def test_rename_by_default_advertises_gpu_shared() -> None:
    text = (
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
        "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n"
    )
    [pool] = parse(
        ConfigMapObject(name="ng", data={"TimeSlicing": text}), node(**{NODE_CONFIG_LABEL: "TimeSlicing"})
    )
    assert (pool.name, pool.resource_name) == ("nvidia-gpu-shared", "nvidia.com/gpu.shared")


def test_the_plugin_env_and_the_config_override_dkps_daemonset_defaults() -> None:
    env = {"DEVICE_LIST_STRATEGY": "cdi-annotations", "NVIDIA_RESOURCE_PREFIX": "example.com"}
    [pool] = parse(fixture(), picked("Exclusive"), env)
    # A CDI list strategy becomes the pool's delivery, as in the per-pool DKP format; the NVIDIA
    # backend keeps its env variable beside the CDI names.
    assert pool.device_delivery is DeviceDelivery.CDI_ANNOTATIONS
    assert pool.options["deviceListStrategy"] == "envvar"
    assert pool.options["passDeviceSpecs"] == "true"
    assert pool.resource_name == "example.com/gpu"
    text = "version: v1\nflags:\n  plugin: {passDeviceSpecs: false}\n"
    [own] = parse(
        ConfigMapObject(name="ng", data={"Exclusive": text}), node(**{NODE_CONFIG_LABEL: "Exclusive"})
    )
    assert own.options["passDeviceSpecs"] == "false"


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        ("version: v2\n", "version", "must be 'v1'"),
        (
            "version: v1\nflags: {migStrategy: both}\n",
            "flags.migStrategy",
            "must be one of none, single, mixed",
        ),
        ("version: v1\nsharing: {timeSlicing: {}, mps: {}}\n", "sharing", "not both"),
        (
            "version: v1\nsharing: {mps: {failRequestsGreaterThanOne: 1}}\n",
            "sharing.mps.failRequestsGreaterThanOne",
            "must be true or false",
        ),
        (
            "version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 0}]}}\n",
            "sharing.timeSlicing.resources[0].replicas",
            "must be 1..64",
        ),
        (
            "version: v1\nresources: {gpus: [{pattern: '*', name: gpu}]}\n",
            "resources",
            "not supported in a NodeGroup config",
        ),
        ("", "<document>", "empty"),
        ("[1, 2]\n", "<document>", "must be a mapping"),
    ],
)
def test_errors_name_the_config_and_the_field(text: str, path: str, message: str) -> None:
    obj = ConfigMapObject(
        name="ng", source="configmap d/ng", data={"Exclusive": text, "Mig": "version: v1\n"}
    )
    with pytest.raises(ConfigErrors) as caught:
        parse(obj, node(**{NODE_CONFIG_LABEL: "Exclusive"}))
    found = [(e.path, e.message) for e in caught.value.errors]
    assert any(p == f"Exclusive: {path}" and message in m for p, m in found), found


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (ConfigMapObject(name="nvidia-device-plugin-32da4e7", data={"x.yaml": ""}), True),
        (ConfigMapObject(name="anything", labels={"app": "nvidia-gpu"}), True),
        (
            ConfigMapObject(name="mounted-copy", data={"Exclusive": "", "TimeSlicing": "", ".hidden": ""}),
            True,
        ),
        (ConfigMapObject(name="hcs-deviceplugin-pools", data={"pools.yaml": ""}), False),
        (ConfigMapObject(name="nvidia-device-plugin-team-a-config", data={"config.yaml": ""}), False),
        (ConfigMapObject(name="nvidia-device-plugin-32da4e7x"), False),
    ],
)
def test_recognised_by_name_label_or_keys(obj: ConfigMapObject, expected: bool) -> None:
    assert is_nodegroup_config(obj) is expected
    assert (detect_format(obj) is Format.NODEGROUP) is expected


def test_a_configmap_shaped_like_two_dkp_formats_is_an_error() -> None:
    obj = ConfigMapObject(name="nvidia-device-plugin-32da4e7", labels={"app": "nvidia-device-plugin"})
    with pytest.raises(ConfigErrors) as caught:
        detect_format(obj)
    [error] = caught.value.errors
    assert error.message.startswith("looks like both a DKP per-pool config")
    assert "and a DKP NodeGroup config" in error.message


def test_every_config_is_checked_for_offline_checks() -> None:
    configs = parse_every_config(fixture(), NO_ENV)
    assert {
        name: [(p.pool.slices_per_unit, p.pool.sharing) for p in pools] for name, pools in configs.items()
    } == {
        "Exclusive": [(1, "")],
        "MPS": [(4, "mps")],
        "Mig": [(1, "")],
        "TimeSlicing": [(4, "")],
    }
    broken = ConfigMapObject(
        name="ng", data={"Exclusive": "version: v2\n", "MPS": "flags: {migStrategy: x}\n"}
    )
    with pytest.raises(ConfigErrors) as caught:
        parse_every_config(broken, NO_ENV)
    assert [e.path for e in caught.value.errors] == ["Exclusive: version", "MPS: flags.migStrategy"]


def test_selector_is_nvidia_uuids_only() -> None:
    assert DeviceSelector(pattern="GPU-") == GPU_SELECTOR


def test_validate_config_checks_each_config_of_the_real_shapes() -> None:
    import io

    from hcs_deviceplugin.pools import validate

    out, err = io.StringIO(), io.StringIO()
    status = validate.main(
        [str(FIXTURES / "rendered.yaml"), str(FIXTURES / "rendered-older.yaml")], out, err, NO_ENV
    )
    assert (status, err.getvalue()) == (0, ""), out.getvalue()
    assert (
        "configmap d8-nvidia-gpu/nvidia-device-plugin-587d6d4: valid dkp-nodegroup config, "
        "Exclusive: pools: nvidia-gpu (nvidia.com/gpu, Card, 1 device entry); "
        "MIG: pools: nvidia-gpu (nvidia.com/gpu, Card, 1 device entry); "
        "TimeSlicing: pools: nvidia-gpu (nvidia.com/gpu, Card x8, 1 device entry)"
    ) in out.getvalue()
    assert "MPS: pools: nvidia-gpu (nvidia.com/gpu, Card x4 mps, 1 device entry)" in out.getvalue()
    assert out.getvalue().rstrip().endswith("2 object(s), 0 pool(s), 0 error(s)")
