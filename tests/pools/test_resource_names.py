"""A pool's full ``resourceName`` (compatibility names such as ``nvidia.com/gpu``): parse and merge rules."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.native import parse_native
from hcs_deviceplugin.pools.objects import ConfigMapObject

SOURCE = "cm/pools.yaml"


def pools_text(*entries: str) -> str:
    return "version: v1\npools:\n" + "".join(f"  - {e}\n" for e in entries)


@pytest.mark.parametrize("name", ["huawei.com/Ascend910", "nvidia.com/gpu", "cambricon.com/mlu370"])
def test_full_name_replaces_prefix_and_pool_name(name: str) -> None:
    [pool] = parse_native(pools_text(f"{{name: legacy, resourceName: {name}}}"), SOURCE)
    assert (pool.name, pool.resource_name) == ("legacy", name)


def test_pools_without_it_keep_the_prefix() -> None:
    pools = parse_native(pools_text("{name: a, resourceName: nvidia.com/gpu}", "{name: b}"), SOURCE)
    assert [p.resource_name for p in pools] == ["nvidia.com/gpu", "gpu.deckhouse.io/b"]


@pytest.mark.parametrize(
    ("entry", "path", "fragment"),
    [
        ("{name: a, resourceName: gpu}", "pools[0].resourceName", "has no '/'"),
        ("{name: a, resourceName: kubernetes.io/gpu}", "pools[0].resourceName", "native 'kubernetes.io/'"),
        ("{name: a, resourceName: 7}", "pools[0].resourceName", "must be a string"),
        (
            "{name: a, scope: cluster, resourceName: nvidia.com/gpu}",
            "pools[0].resourceName",
            "not allowed with scope 'cluster'",
        ),
    ],
)
def test_invalid_full_names(entry: str, path: str, fragment: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native(pools_text(entry), SOURCE)
    [error] = caught.value.errors
    assert error.path == path and fragment in error.message, error


def test_two_pools_of_one_document_cannot_serve_one_resource() -> None:
    text = pools_text("{name: a, resourceName: nvidia.com/gpu}", "{name: b, resourceName: nvidia.com/gpu}")
    with pytest.raises(ConfigErrors) as caught:
        parse_native(text, SOURCE)
    [error] = caught.value.errors
    assert error.path == "pools[1].resourceName"
    assert "resource 'nvidia.com/gpu' is already served by pools[0]" in error.message


def test_a_full_name_equal_to_another_pools_generated_name_clashes() -> None:
    text = pools_text("{name: a}", "{name: b, resourceName: gpu.deckhouse.io/a}")
    with pytest.raises(ConfigErrors) as caught:
        parse_native(text, SOURCE)
    assert [e.path for e in caught.value.errors] == ["pools[1].resourceName"]


def test_clash_across_objects_keeps_the_first_and_names_both() -> None:
    def object_(name: str, body: str) -> ConfigMapObject:
        return ConfigMapObject(
            name=name, namespace="ns", data={"pools.yaml": pools_text(body)}, source=f"configmap ns/{name}"
        )

    aggregator = PoolAggregator(lambda pools, errors: None)
    pools, errors = aggregator.update(
        "api",
        [
            object_("zz", "{name: late, resourceName: nvidia.com/gpu}"),
            object_("aa", "{name: early, resourceName: nvidia.com/gpu}"),
        ],
    )
    assert [(p.name, p.resource_name) for p in pools.pools] == [("early", "nvidia.com/gpu")]
    [error] = errors
    assert error.source == "configmap ns/zz"
    assert error.message == (
        "resource 'nvidia.com/gpu' is also served by pool 'early' of configmap ns/aa, which wins; "
        "this definition is ignored"
    )
