"""The native pool format: every valid shape POOLS.md shows, and every rule's error with its field path."""

from __future__ import annotations

import textwrap

import pytest

from hcs_deviceplugin.model import DeviceDelivery, DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.native import parse_native

SOURCE = "pools.yaml"


def pool(name: str, prefix: str = "gpu.deckhouse.io", **fields: object) -> Pool:
    return Pool(name=name, resource_name=f"{prefix}/{name}", source=SOURCE, **fields)  # type: ignore[arg-type]


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


POOLS_MD_EXAMPLE = doc(
    """
    version: v1
    resourcePrefix: gpu.deckhouse.io
    pools:
      - name: team-a
        unit: Card
        slicesPerUnit: 4
        maxDevicesPerNode: 8
        devices:
          - uuid: GPU-0a1b2c3d-1111-2222-3333-444455556666
          - inventoryID: k8s-w1-0-10de-2203
          - pciAddress: "0000:17:00.0"
            node: k8s-w1
      - name: infer-npu
        unit: Partition
        profile: vir04
        devices:
          - uuid: "npu-chip-5a3c…"
    """
)

VALID = [
    pytest.param("", [], id="empty-document"),
    pytest.param("# only a comment\n", [], id="comment-only"),
    pytest.param("{}", [], id="empty-mapping"),
    pytest.param("pools: []", [], id="no-pools-without-version"),
    pytest.param("version: v1\npools: []", [], id="no-pools"),
    pytest.param("version: v1\npools:", [], id="pools-null"),
    pytest.param(
        POOLS_MD_EXAMPLE,
        [
            pool(
                "team-a",
                slices_per_unit=4,
                max_devices_per_node=8,
                devices=(
                    DeviceSelector(uuid="GPU-0a1b2c3d-1111-2222-3333-444455556666"),
                    DeviceSelector(inventory_id="k8s-w1-0-10de-2203"),
                    DeviceSelector(pci_address="0000:17:00.0", node="k8s-w1"),
                ),
            ),
            pool(
                "infer-npu",
                unit=UnitKind.PARTITION,
                profile="vir04",
                devices=(DeviceSelector(uuid="npu-chip-5a3c…"),),
            ),
        ],
        id="pools-md-example",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: a\n",
        [pool("a")],
        id="defaults-card-exclusive-no-devices",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: big\n    scope: cluster\n",
        [pool("big", prefix="cluster.gpu.deckhouse.io")],
        id="scope-cluster",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: n\n    scope: node\n",
        [pool("n")],
        id="scope-node-explicit",
    ),
    pytest.param(
        "version: v1\nresourcePrefix: example.com\npools:\n  - {name: a}\n  - {name: b, scope: cluster}\n",
        [pool("a", prefix="example.com"), pool("b", prefix="cluster.example.com")],
        id="explicit-prefix-and-cluster-scope",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: mig\n    unit: Partition\n    profile: 1g.10gb\n",
        [pool("mig", unit=UnitKind.PARTITION, profile="1g.10gb")],
        id="partition-with-profile",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: mig\n    unit: MIG\n    profile: 3g.40gb\n    slicesPerUnit: 2\n",
        [pool("mig", unit=UnitKind.PARTITION, profile="3g.40gb", slices_per_unit=2)],
        id="mig-alias",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: shared\n    slicesPerUnit: 4\n",
        [pool("shared", slices_per_unit=4)],
        id="slices-4",
    ),
    *(
        pytest.param(
            f"version: v1\npools:\n  - {{name: p, deviceDelivery: {delivery.value}}}\n",
            [pool("p", device_delivery=delivery)],
            id=f"delivery-{delivery.value}",
        )
        for delivery in DeviceDelivery
    ),
    pytest.param(
        "version: v1\npools:\n  - {name: lo, slicesPerUnit: 1}\n  - {name: hi, slicesPerUnit: 64}\n",
        [pool("lo"), pool("hi", slices_per_unit=64)],
        id="slices-bounds",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: a\n    devices:\n      - pciAddress: 0000:AB:1F.7\n",
        [pool("a", devices=(DeviceSelector(pci_address="0000:ab:1f.7"),))],
        id="pci-unquoted-uppercase-normalised",
    ),
    pytest.param(
        doc(
            """
            version: v1
            pools:
              - name: a
                devices:
                  - {pciAddress: "0000:17:00.0", node: w1}
                  - {pciAddress: "0000:17:00.0", node: w2}
                  - {uuid: GPU-1, node: w1.example.com}
            """
        ),
        [
            pool(
                "a",
                devices=(
                    DeviceSelector(pci_address="0000:17:00.0", node="w1"),
                    DeviceSelector(pci_address="0000:17:00.0", node="w2"),
                    DeviceSelector(uuid="GPU-1", node="w1.example.com"),
                ),
            )
        ],
        id="same-pci-on-different-nodes",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: a\n    profile:\n    maxDevicesPerNode:\n    devices:\n",
        [pool("a")],
        id="null-optionals-are-absent",
    ),
    pytest.param(
        '{"version": "v1", "pools": [{"name": "j", "slicesPerUnit": 2}]}',
        [pool("j", slices_per_unit=2)],
        id="json-is-yaml",
    ),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_documents(text: str, expected: list[Pool]) -> None:
    assert parse_native(text, SOURCE) == expected


def test_json_syntax_allows_tabs() -> None:
    text = '{\n\t"version": "v1",\n\t"pools": [{"name": "t"}]\n}'
    assert parse_native(text, SOURCE, "json") == [pool("t")]


def one_pool(body: str) -> str:
    """A valid document around one pool whose fields are ``body`` (YAML, 4-space indented)."""
    return "version: v1\npools:\n  - name: p\n" + textwrap.indent(textwrap.dedent(body), "    ")


# (path, substring of message) for every expected error, in the order the parser reports them.
INVALID = [
    pytest.param("pools: []\nextra: 1\n", [("extra", "unknown key")], id="unknown-top-level-key"),
    pytest.param(
        "version: v1\nPools: []\n", [("Pools", "did you mean 'pools'?")], id="top-level-key-wrong-case"
    ),
    pytest.param(one_pool("colour: red\n"), [("pools[0].colour", "unknown key")], id="unknown-pool-key"),
    pytest.param(
        one_pool("deviceDelivery: cdi\n"),
        [("pools[0].deviceDelivery", "one of deviceSpecs, env, cdi-cri, cdi-annotations, got string")],
        id="delivery-unknown",
    ),
    pytest.param(
        one_pool("deviceDelivery: CDI-CRI\n"),
        [("pools[0].deviceDelivery", "must be one of")],
        id="delivery-case-sensitive",
    ),
    pytest.param(
        one_pool("slicePerUnit: 2\n"),
        [("pools[0].slicePerUnit", "did you mean 'slicesPerUnit'?")],
        id="typo-pool-key",
    ),
    pytest.param(
        one_pool("devices:\n  - uuid: a\n    nod: w1\n"),
        [("pools[0].devices[0].nod", "did you mean 'node'?")],
        id="typo-device-key",
    ),
    pytest.param("version: v2\npools: []\n", [("version", "must be 'v1', got string 'v2'")], id="version-v2"),
    pytest.param("version: 1\n", [("version", "got integer 1")], id="version-integer"),
    pytest.param("pools:\n  - name: a\n", [("version", "required")], id="version-missing-with-pools"),
    pytest.param("- a\n- b\n", [("<document>", "must be a mapping")], id="document-is-a-list"),
    pytest.param("version: v1\npools: {a: 1}\n", [("pools", "must be a list")], id="pools-not-a-list"),
    pytest.param(
        "version: v1\npools:\n  - team-a\n", [("pools[0]", "must be a mapping")], id="pool-not-a-mapping"
    ),
    pytest.param("version: v1\npools:\n  - unit: Card\n", [("pools[0].name", "required")], id="name-missing"),
    pytest.param(
        "version: v1\npools:\n  - name: Team_A\n",
        [("pools[0].name", "not a DNS-1123 label")],
        id="name-invalid",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: " + "a" * 64 + "\n",
        [("pools[0].name", "no more than 63")],
        id="name-too-long",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: 42\n", [("pools[0].name", "must be a string")], id="name-int"
    ),
    pytest.param(
        "version: v1\npools:\n  - name: a\n  - name: b\n  - name: a\n",
        [("pools[2].name", "duplicate pool name 'a' (first defined at pools[0])")],
        id="duplicate-pool",
    ),
    pytest.param(one_pool("slicesPerUnit: 0\n"), [("pools[0].slicesPerUnit", "1..64, got 0")], id="slices-0"),
    pytest.param(
        one_pool("slicesPerUnit: 65\n"), [("pools[0].slicesPerUnit", "1..64, got 65")], id="slices-65"
    ),
    pytest.param(
        one_pool('slicesPerUnit: "4"\n'),
        [("pools[0].slicesPerUnit", "must be an integer, got string '4'")],
        id="slices-string",
    ),
    pytest.param(
        one_pool("slicesPerUnit: true\n"),
        [("pools[0].slicesPerUnit", "must be an integer, got boolean true")],
        id="slices-bool",
    ),
    pytest.param(
        one_pool("slicesPerUnit: 2.0\n"), [("pools[0].slicesPerUnit", "got number 2.0")], id="slices-float"
    ),
    pytest.param(
        one_pool("unit: GPU\n"), [("pools[0].unit", "must be Card or Partition")], id="unit-unknown"
    ),
    pytest.param(one_pool("unit: card\n"), [("pools[0].unit", "got string 'card'")], id="unit-wrong-case"),
    pytest.param(
        one_pool("unit: Partition\n"),
        [("pools[0].profile", "required when unit is Partition")],
        id="profile-missing",
    ),
    pytest.param(
        one_pool("unit: MIG\n"),
        [("pools[0].profile", "required when unit is Partition")],
        id="profile-missing-mig",
    ),
    pytest.param(
        one_pool("profile: 1g.10gb\n"),
        [("pools[0].profile", "not allowed when unit is Card")],
        id="profile-forbidden",
    ),
    pytest.param(
        one_pool("unit: Partition\nprofile: ''\n"),
        [("pools[0].profile", "must not be empty")],
        id="profile-empty",
    ),
    pytest.param(
        one_pool("scope: global\n"), [("pools[0].scope", "must be one of node, cluster")], id="scope-bad"
    ),
    pytest.param(
        one_pool("maxDevicesPerNode: 0\n"),
        [("pools[0].maxDevicesPerNode", ">= 1, got 0")],
        id="max-devices-0",
    ),
    pytest.param(
        one_pool("maxDevicesPerNode: false\n"),
        [("pools[0].maxDevicesPerNode", "got boolean false")],
        id="max-devices-bool",
    ),
    pytest.param(
        one_pool("devices: GPU-1\n"), [("pools[0].devices", "must be a list")], id="devices-not-a-list"
    ),
    pytest.param(
        one_pool("devices:\n  - GPU-1\n"),
        [("pools[0].devices[0]", "must be a mapping")],
        id="device-not-a-mapping",
    ),
    pytest.param(
        one_pool("devices:\n  - {uuid: GPU-1, pciAddress: '0000:17:00.0'}\n"),
        [("pools[0].devices[0]", "has uuid and pciAddress")],
        id="device-two-keys",
    ),
    pytest.param(
        one_pool("devices:\n  - {node: w1}\n"), [("pools[0].devices[0]", "has none")], id="device-zero-keys"
    ),
    pytest.param(
        one_pool("devices:\n  - {uuid: ''}\n"),
        [("pools[0].devices[0].uuid", "must not be empty")],
        id="uuid-empty",
    ),
    pytest.param(
        one_pool("devices:\n  - {inventoryID: 12}\n"),
        [("pools[0].devices[0].inventoryID", "quote it")],
        id="inventory-id-int",
    ),
    pytest.param(
        one_pool("devices:\n  - {pciAddress: '17:00.0'}\n"),
        [("pools[0].devices[0].pciAddress", "not a PCI address")],
        id="pci-no-domain",
    ),
    pytest.param(
        one_pool("devices:\n  - {pciAddress: '0000:g7:00.0'}\n"),
        [("pools[0].devices[0].pciAddress", "not a PCI address")],
        id="pci-not-hex",
    ),
    pytest.param(
        one_pool("devices:\n  - {pciAddress: '0000:17:20.0'}\n"),
        [("pools[0].devices[0].pciAddress", "device <= 1f")],
        id="pci-device-out-of-range",
    ),
    pytest.param(
        one_pool("devices:\n  - {pciAddress: '0000:17:00.8'}\n"),
        [("pools[0].devices[0].pciAddress", "function <= 7")],
        id="pci-function-out-of-range",
    ),
    pytest.param(
        one_pool("devices:\n  - {uuid: a, node: Worker_1}\n"),
        [("pools[0].devices[0].node", "not a valid node name")],
        id="node-invalid",
    ),
    pytest.param(
        one_pool("devices:\n  - uuid: GPU-1\n  - uuid: GPU-2\n  - uuid: GPU-1\n"),
        [("pools[0].devices[2]", "same card as pools[0].devices[0] (uuid=GPU-1)")],
        id="duplicate-device",
    ),
    pytest.param(
        one_pool("devices:\n  - {pciAddress: '0000:17:00.0', node: w1}\n  - {pciAddress: '0000:17:00.0'}\n"),
        [("pools[0].devices[1]", "same card as pools[0].devices[0]")],
        id="duplicate-device-nodeless-overlaps-node",
    ),
    pytest.param(
        one_pool("devices:\n  - {pciAddress: '0000:17:00.0'}\n  - {pciAddress: '0000:17:00.0'}\n"),
        [("pools[0].devices[1]", "same card")],
        id="duplicate-pci-after-normalising",
    ),
    pytest.param(
        "version: v1\nresourcePrefix: Example.COM\npools:\n  - name: a\n",
        [("resourcePrefix", "not a DNS-1123 subdomain")],
        id="prefix-uppercase",
    ),
    pytest.param(
        "version: v1\nresourcePrefix: kubernetes.io\npools:\n  - name: a\n",
        [("resourcePrefix", "native 'kubernetes.io/' namespace")],
        id="prefix-native-namespace",
    ),
    pytest.param(
        "version: v1\nresourcePrefix: gpu.example.com/\npools:\n  - name: a\n",
        [("resourcePrefix", "more than one '/'")],
        id="prefix-with-slash",
    ),
    pytest.param(
        "version: v1\nresourcePrefix: "
        + ".".join(["a" * 60] * 4)
        + "\npools:\n  - name: a\n    scope: cluster\n",
        [("resourcePrefix", "for scope 'cluster' pools")],
        id="prefix-too-long-only-for-cluster",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: a\n    slicesPerUnit: 3\n  slicesPerUnit: 4\n",
        [("<document>", "invalid YAML at line 5, column 3")],
        id="yaml-syntax-error",
    ),
    pytest.param(
        "version: v1\npools:\n  - name: a\n    unit: Card\n    unit: Partition\n",
        [("<document>", "line 5, column 5: found duplicate key 'unit'")],
        id="yaml-duplicate-key",
    ),
    pytest.param(
        "version: v1\npools: []\n---\nversion: v1\n",
        [("<document>", "line 3, column 1: but found another document")],
        id="yaml-two-documents",
    ),
    pytest.param(
        doc(
            """
            version: v3
            pool: []
            pools:
              - name: ok
              - name: Bad
                slicesPerUnit: 0
                unit: Partition
              - name: ok
                devices:
                  - {uuid: x, inventoryID: y}
                  - {pciAddress: nope}
            """
        ),
        [
            ("pool", "did you mean 'pools'?"),
            ("version", "must be 'v1'"),
            ("pools[1].name", "not a DNS-1123 label"),
            ("pools[1].slicesPerUnit", "1..64"),
            ("pools[1].profile", "required"),
            ("pools[2].devices[0]", "has uuid and inventoryID"),
            ("pools[2].devices[1].pciAddress", "not a PCI address"),
            ("pools[2].name", "duplicate pool name 'ok'"),
        ],
        id="multiple-errors-together",
    ),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_invalid_documents(text: str, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native(text, SOURCE)
    errors = caught.value.errors
    assert [e.path for e in errors] == [path for path, _ in expected], errors
    for error, (_, fragment) in zip(errors, expected, strict=True):
        assert error.source == SOURCE
        assert fragment in error.message, error


def test_yaml_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native("version: v1\npools:\n  - name: [a\n", "cm/pools.yaml")
    [error] = caught.value.errors
    assert error.source == "cm/pools.yaml"
    assert error.path == "<document>"
    assert "line 4, column 1" in error.message
    assert "while parsing a flow sequence at line 3" in error.message


def test_json_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native('{\n  "version": "v1",\n  "pools": [,]\n}', "p.json", "json")
    [error] = caught.value.errors
    assert (error.path, error.message) == ("<document>", "invalid JSON at line 3, column 13: Expecting value")


def test_json_duplicate_key_is_an_error() -> None:
    with pytest.raises(ConfigErrors, match="duplicate key 'pools'"):
        parse_native('{"version": "v1", "pools": [{"name": "a"}], "pools": []}', "p.json", "json")


def test_error_strings_name_source_path_and_reason() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native(one_pool("slicesPerUnit: 0\n"), "/etc/hcs/pools/pools.yaml")
    assert str(caught.value) == "/etc/hcs/pools/pools.yaml: pools[0].slicesPerUnit: must be 1..64, got 0"
    assert caught.value.errors == [
        ConfigError("/etc/hcs/pools/pools.yaml", "pools[0].slicesPerUnit", "must be 1..64, got 0")
    ]


def test_cards_in_two_pools_are_not_a_parse_error() -> None:
    text = doc(
        """
        version: v1
        pools:
          - {name: a, devices: [{uuid: GPU-1}]}
          - {name: b, devices: [{uuid: GPU-1}]}
        """
    )
    assert [p.name for p in parse_native(text, SOURCE)] == ["a", "b"]


def test_source_is_recorded_on_every_pool() -> None:
    pools = parse_native(POOLS_MD_EXAMPLE, "configmap/hcs-deviceplugin-pools")
    assert {p.source for p in pools} == {"configmap/hcs-deviceplugin-pools"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("spread", "spread"), ("pack", "pack")],
)
def test_replica_placement_is_read(value: str, expected: str) -> None:
    text = f"version: v1\npools:\n  - name: a\n    slicesPerUnit: 4\n    replicaPlacement: {value}\n"
    (pool,) = parse_native(text, "pools.yaml")
    assert pool.replica_placement == expected


@pytest.mark.parametrize("value", ["packed", "1", "true"])
def test_replica_placement_rejects_other_values(value: str) -> None:
    text = f"version: v1\npools:\n  - name: a\n    replicaPlacement: {value}\n"
    with pytest.raises(ConfigErrors) as err:
        parse_native(text, "pools.yaml")
    assert [e.path for e in err.value.errors] == ["pools[0].replicaPlacement"]


def test_replica_placement_defaults_to_spread() -> None:
    (pool,) = parse_native("version: v1\npools:\n  - name: a\n", "pools.yaml")
    assert pool.replica_placement == "spread"


@pytest.mark.parametrize(
    ("value", "what", "column"),
    [
        pytest.param("2024-13-45", "as a date or timestamp: month must be in 1..12", 11, id="date"),
        pytest.param("0b_", "as an integer", 11, id="binary-integer"),
        pytest.param("0x_", "as an integer", 11, id="hex-integer"),
        pytest.param("._", "as a number", 11, id="number"),
    ],
)
def test_a_scalar_python_cannot_build_is_a_yaml_error_at_its_place(
    value: str, what: str, column: int
) -> None:
    """The resolvers take these for a number or a date, and Python refuses to build them: the
    document is refused with the place and the value, not a ValueError escaping the parser."""
    with pytest.raises(ConfigErrors) as caught:
        parse_native(f"version: v1\npools:\n  - name: {value}\n", SOURCE)
    [error] = caught.value.errors
    assert error.path == "<document>"
    assert f"line 3, column {column}: cannot read {value!r} {what}" in error.message
