"""The DKP ADR allowlist format: inventoryIDs one per line, exclusive Card pool gpu.deckhouse.io/<pool>."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.model import Card, DeviceSelector, Pool, UnitKind, inventory_id
from hcs_deviceplugin.pools.allowlist import is_inventory_id, parse_allowlist
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.objects import ConfigMapObject

SOURCE = "configmap d8-gpu-control-plane/gpu-device-plugin-a100"


def allowlist(text: str, name: str = "gpu-device-plugin-a100", **data: str) -> ConfigMapObject:
    return ConfigMapObject(
        name=name, namespace="d8-gpu-control-plane", data={"DP_ALLOWED_DEVICES": text, **data}, source=SOURCE
    )


def expected(*ids: str) -> list[Pool]:
    return [
        Pool(
            name="a100",
            resource_name="gpu.deckhouse.io/a100",
            unit=UnitKind.CARD,
            slices_per_unit=1,
            devices=tuple(DeviceSelector(inventory_id=i) for i in ids),
            source=SOURCE,
        )
    ]


def card(index: int, vendor: int = 0x10DE, device: int = 0x2203) -> Card:
    return Card(
        id=f"GPU-{index}", backend="nvidia", vendor="nvidia", model="A100", index=index,
        pci_vendor_id=vendor, pci_device_id=device,
    )  # fmt: skip


LONG_NODE = "k8s-worker-with-a-very-long-name.gpu.cluster.example.deckhouse.ru"
W1_0, W1_1 = "k8s-w1-0-10de-2203", "k8s-w1-1-10de-2203"


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        pytest.param(f"{W1_0}\n{W1_1}\n", [W1_0, W1_1], id="two"),
        pytest.param(
            f"\n  {W1_0}  \n\n\t\nk8s-w2-12-10de-20b5", [W1_0, "k8s-w2-12-10de-20b5"], id="blank-and-spaces"
        ),
        pytest.param(f"{W1_0}\r\n", [W1_0], id="crlf"),
        pytest.param("", [], id="empty-is-a-pool-without-cards"),
        pytest.param(
            inventory_id("k8s-w1.gpu.example.ru", card(0)),
            ["k8s-w1-gpu-example-ru-0-10de-2203"],
            id="dotted-node",
        ),
        pytest.param(inventory_id(LONG_NODE, card(3)), [inventory_id(LONG_NODE, card(3))], id="cut-to-63"),
    ],
)
def test_valid_allowlists(text: str, ids: list[str]) -> None:
    assert parse_allowlist(allowlist(text)) == expected(*ids)


def test_a_cut_id_really_loses_its_suffix() -> None:
    cut = inventory_id(LONG_NODE, card(3))
    assert len(cut) == 63
    assert not cut.endswith("-3-10de-2203")
    assert is_inventory_id(cut)


@pytest.mark.parametrize(
    "value",
    [
        "K8s-w1-0-10de-2203",
        "k8s-w1-0-10DE-2203",
        "k8s-w1-00-10de-2203",
        "k8s-w1-0-10de-220",
        "worker-01-0000:17:00.0",
        "GPU-0a1b2c3d-1111-2222-3333-444455556666",
        "k8s_w1-0-10de-2203",
        "a" * 64,
        "x" * 52 + "-0-10de-2203",
        "# a comment",
    ],
)
def test_not_inventory_ids(value: str) -> None:
    assert not is_inventory_id(value)


def test_every_bad_line_is_reported_with_its_number() -> None:
    text = "k8s-w1-0-10de-2203\nworker-01-0000:17:00.0\n\nk8s-w1-1-10de-2203\nk8s-w1-0-10de-2203\n"
    with pytest.raises(ConfigErrors) as caught:
        parse_allowlist(allowlist(text))
    assert [(e.source, e.path) for e in caught.value.errors] == [
        (SOURCE, "DP_ALLOWED_DEVICES: line 2"),
        (SOURCE, "DP_ALLOWED_DEVICES: line 5"),
    ]
    assert caught.value.errors[0].message == (
        "'worker-01-0000:17:00.0' is not an inventoryID: <node>-<slot>-<pciVendor>-<pciDevice> in lower "
        "case, at most 63 characters, e.g. 'k8s-w1-0-10de-2203'"
    )
    assert caught.value.errors[1].message == "'k8s-w1-0-10de-2203' is listed again (first on line 1)"


@pytest.mark.parametrize(
    ("obj", "errors"),
    [
        pytest.param(
            allowlist("", name="gpu-device-plugin-A100"),
            [("metadata.name", "pool name 'A100' (from 'gpu-device-plugin-A100'): 'A100' is not a DNS-1123")],
            id="pool-name-invalid",
        ),
        pytest.param(
            allowlist("", name="allowed-a100"),
            [("metadata.name", "'allowed-a100': an allowlist ConfigMap is named gpu-device-plugin-<pool>")],
            id="key-in-a-differently-named-configmap",
        ),
        pytest.param(
            allowlist("k8s-w1-0-10de-2203", README="x"),
            [("README", "unexpected key; an allowlist ConfigMap holds only DP_ALLOWED_DEVICES")],
            id="extra-key",
        ),
        pytest.param(
            ConfigMapObject(name="gpu-device-plugin-a100", data={}, source=SOURCE),
            [("data", "needs the key DP_ALLOWED_DEVICES (inventoryIDs, one per line)")],
            id="no-key",
        ),
    ],
)
def test_object_level_errors(obj: ConfigMapObject, errors: list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_allowlist(obj)
    found = caught.value.errors
    assert [e.path for e in found] == [path for path, _ in errors]
    assert all(e.message.startswith(start) for e, (_, start) in zip(found, errors, strict=True)), found
