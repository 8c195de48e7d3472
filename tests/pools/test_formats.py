"""Recognising a ConfigMap's format, and the native format inside ConfigMaps with several keys."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.formats import Format, detect_format, parse_configmap, parse_configmap_located
from hcs_deviceplugin.pools.objects import ConfigMapObject

NATIVE = "version: v1\npools:\n  - name: team-a\n"
DKP = "version: v1\nresources:\n  gpus:\n  - {pattern: GPU-1, name: team-a}\n"
ALLOWED = "k8s-w1-0-10de-2203\n"


def obj(
    name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None, source: str = "cm"
) -> ConfigMapObject:
    return ConfigMapObject(name=name, namespace="ns", data=data or {}, labels=labels or {}, source=source)


@pytest.mark.parametrize(
    ("configmap", "expected"),
    [
        pytest.param(obj("hcs-deviceplugin-pools", {"pools.yaml": NATIVE}), Format.NATIVE, id="native"),
        pytest.param(
            obj("whatever", {"config.yaml": NATIVE}), Format.NATIVE, id="config-yaml-key-alone-is-native"
        ),
        pytest.param(
            obj("x", {"config.yaml": DKP}, labels={"app": "nvidia-device-plugin", "pool": "team-a"}),
            Format.DKP,
            id="dkp-by-label",
        ),
        pytest.param(
            obj("nvidia-device-plugin-team-a-config", {"config.yaml": DKP}), Format.DKP, id="dkp-by-name"
        ),
        pytest.param(
            obj("x", {"config.yaml": NATIVE}, labels={"app": "other"}), Format.NATIVE, id="other-app"
        ),
        pytest.param(
            obj("gpu-device-plugin-a100", {"DP_ALLOWED_DEVICES": ALLOWED}), Format.ALLOWLIST, id="allowlist"
        ),
        pytest.param(obj("gpu-device-plugin-a100"), Format.ALLOWLIST, id="allowlist-by-name-without-key"),
        pytest.param(
            obj("somewhere", {"DP_ALLOWED_DEVICES": ALLOWED}), Format.ALLOWLIST, id="allowlist-by-key"
        ),
        pytest.param(
            obj("gpu-device-plugin-a.yaml", {"gpu-device-plugin-a.yaml": NATIVE}), Format.NATIVE, id="file"
        ),
        pytest.param(obj("nvidia-device-plugin-config"), Format.NATIVE, id="dkp-name-needs-a-pool"),
    ],
)
def test_detect_format(configmap: ConfigMapObject, expected: Format) -> None:
    assert detect_format(configmap) is expected


def test_two_shapes_at_once_is_an_error() -> None:
    both = obj("gpu-device-plugin-a", {"DP_ALLOWED_DEVICES": ALLOWED}, labels={"app": "nvidia-device-plugin"})
    with pytest.raises(ConfigErrors) as caught:
        parse_configmap(both)
    [error] = caught.value.errors
    assert (error.source, error.path) == ("cm", "metadata")
    assert "looks like both" in error.message


def test_each_format_is_parsed() -> None:
    native = parse_configmap(obj("pools", {"pools.yaml": NATIVE}))
    dkp = parse_configmap(obj("nvidia-device-plugin-team-a-config", {"config.yaml": DKP}), env={})
    allowlist = parse_configmap(obj("gpu-device-plugin-team-a", {"DP_ALLOWED_DEVICES": ALLOWED}))
    assert [p.resource_name for p in native + dkp + allowlist] == ["gpu.deckhouse.io/team-a"] * 3
    assert [len(p.devices) for p in native + dkp + allowlist] == [0, 1, 1]


def test_native_reads_every_pool_document_key_and_skips_the_rest() -> None:
    configmap = obj(
        "pools",
        {
            "a.yaml": "version: v1\npools: [{name: a}]\n",
            "b.yml": "version: v1\npools: [{name: b}]\n",
            "c.json": '{\n\t"version": "v1", "pools": [{"name": "c"}]\n}',
            "README": "not: [yaml",
            "notes.txt": "not: [yaml",
            ".hidden.yaml": "not: [yaml",
        },
    )
    located = parse_configmap_located(configmap)
    assert [(p.pool.name, p.path) for p in located] == [
        ("a", "a.yaml: pools[0].name"),
        ("b", "b.yml: pools[0].name"),
        ("c", "c.json: pools[0].name"),
    ]
    assert {p.pool.source for p in located} == {"cm"}


def test_native_errors_name_the_key() -> None:
    configmap = obj(
        "pools",
        {"pools.yaml": "version: v1\npools: [{name: a, slicesPerUnit: 0}]\n", "more.yaml": "pools: [x"},
        source="configmap ns/pools",
    )
    with pytest.raises(ConfigErrors) as caught:
        parse_configmap(configmap)
    assert [str(e) for e in caught.value.errors] == [
        "configmap ns/pools: more.yaml: <document>: invalid YAML at line 1, column 10: expected ',' or ']', "
        "but got '<stream end>' (while parsing a flow sequence at line 1)",
        "configmap ns/pools: pools.yaml: pools[0].slicesPerUnit: must be 1..64, got 0",
    ]


def test_a_file_object_is_not_prefixed_with_its_own_name() -> None:
    configmap = ConfigMapObject(
        name="a.yaml",
        data={"a.yaml": "version: v1\npools: [{name: a, slicesPerUnit: 0}]\n"},
        source="/etc/p/a.yaml",
    )
    with pytest.raises(ConfigErrors) as caught:
        parse_configmap(configmap)
    assert [(e.source, e.path) for e in caught.value.errors] == [("/etc/p/a.yaml", "pools[0].slicesPerUnit")]


def test_a_pool_in_two_keys_of_one_configmap_is_an_error() -> None:
    configmap = obj(
        "pools",
        {"a.yaml": "version: v1\npools: [{name: x}]\n", "b.yaml": "version: v1\npools: [{name: x}]\n"},
    )
    with pytest.raises(ConfigErrors) as caught:
        parse_configmap(configmap)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("b.yaml: pools[0].name", "pool 'x' is also defined at a.yaml: pools[0].name")
    ]


def test_a_configmap_without_pool_documents_has_no_pools() -> None:
    assert parse_configmap(obj("unrelated", {"README": "hello"})) == []
