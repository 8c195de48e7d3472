"""The pools ConfigMap: native format, empty by default, readable by the daemon's own parser."""

from __future__ import annotations

import yaml

from hcs_deviceplugin.pools.native import parse_native
from tests.chart.chart import CHART, only, render

EXAMPLE = {
    "version": "v1",
    "pools": [
        {
            "name": "team-a",
            "unit": "Card",
            "slicesPerUnit": 4,
            "devices": [
                {"uuid": "GPU-0a1b2c3d-1111-2222-3333-444455556666"},
                {"inventoryID": "k8s-w1-0-10de-2203"},
            ],
        },
        {"name": "infer", "unit": "Card", "devices": [{"pciAddress": "0000:17:00.0", "node": "k8s-w1"}]},
    ],
}


def _pools_yaml(values: dict[str, object] | None = None) -> str:
    configmap = only(render(values), "ConfigMap")
    assert configmap["metadata"]["name"] == "hcs-deviceplugin-pools"
    assert set(configmap["data"]) == {"pools.yaml"}
    text: str = configmap["data"]["pools.yaml"]
    return text


def test_default_pools_are_empty_and_valid() -> None:
    text = _pools_yaml()
    assert yaml.safe_load(text) == {"version": "v1", "pools": []}
    assert parse_native(text, "configmap hcs-system/hcs-deviceplugin-pools") == []


def test_example_pools_render_and_parse() -> None:
    text = _pools_yaml({"pools": {"config": EXAMPLE}})
    pools = parse_native(text, "configmap hcs-system/hcs-deviceplugin-pools")
    assert [(p.name, p.resource_name, p.slices_per_unit) for p in pools] == [
        ("team-a", "gpu.deckhouse.io/team-a", 4),
        ("infer", "gpu.deckhouse.io/infer", 1),
    ]


def test_values_yaml_documents_the_native_example() -> None:
    """The commented example in values.yaml is itself a valid native document."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    start = lines.index("  # The pools.yaml document. Example:") + 1
    example: list[str] = []
    for line in lines[start:]:
        if not line.startswith("  #   "):
            break
        example.append(line.removeprefix("  #   "))
    pools = parse_native("\n".join(example), "values.yaml example")
    assert [p.name for p in pools] == ["team-a"]


def test_existing_configmap_is_mounted_not_created() -> None:
    objects = render({"pools": {"create": False, "name": "gpu-pools"}})
    assert not [o for o in objects if o["kind"] == "ConfigMap"]
    volumes = only(objects, "DaemonSet")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "pools", "configMap": {"name": "gpu-pools"}} in volumes
