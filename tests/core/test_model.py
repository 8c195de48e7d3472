"""Model values: identities the control plane relies on, and ContainerEdits merging."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    DeviceNode,
    DeviceSelector,
    Pool,
    PoolSet,
    inventory_id,
    replica_unit_id,
    selector_matches,
)


def card(**kw: object) -> Card:
    base: dict[str, object] = {
        "id": "GPU-1",
        "backend": "simulated",
        "vendor": "x",
        "model": "m",
        "index": 0,
        "pci_address": "0000:17:00.0",
        "pci_vendor_id": 0x10DE,
        "pci_device_id": 0x2203,
    }
    base.update(kw)
    return Card(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("node", "index", "expected"),
    [
        ("k8s-w1.gpu.example.ru", 0, "k8s-w1-gpu-example-ru-0-10de-2203"),
        ("K8S_W1", 3, "k8s-w1-3-10de-2203"),
        ("a" * 70, 1, ("a" * 70 + "-1-10de-2203")[:63]),
    ],
    ids=["pools-md-example", "upper-and-underscore", "cut-to-63"],
)
def test_inventory_id_as_the_control_plane_builds_it(node: str, index: int, expected: str) -> None:
    assert inventory_id(node, card(index=index)) == expected


@pytest.mark.parametrize(
    ("selector", "node", "matches"),
    [
        (DeviceSelector(uuid="GPU-1"), "n1", True),
        (DeviceSelector(uuid="GPU-2"), "n1", False),
        (DeviceSelector(inventory_id="n1-0-10de-2203"), "n1", True),
        (DeviceSelector(inventory_id="n1-0-10de-2203"), "n2", False),
        (DeviceSelector(pci_address="0000:17:00.0"), "n1", True),
        (DeviceSelector(pci_address="0000:17:00.0", node="n2"), "n1", False),
        (DeviceSelector(pci_address="0000:17:00.0", node="n1"), "n1", True),
        (DeviceSelector(), "n1", False),
    ],
    ids=[
        "uuid",
        "other-uuid",
        "inventory",
        "inventory-other-node",
        "pci",
        "pci-other-node",
        "pci-node",
        "empty",
    ],
)
def test_selector_matches(selector: DeviceSelector, node: str, matches: bool) -> None:
    assert selector_matches(selector, card(), node) is matches


def test_replica_ids_derive_from_the_card_id() -> None:
    assert replica_unit_id("GPU-1", 3) == "GPU-1::3"


def test_merge_is_first_writer_wins_like_kubelet() -> None:
    a = ContainerEdits(env={"K": "a"}, devices=(DeviceNode("/dev/x", "/dev/a"),), cdi_devices=("v/c=1",))
    b = ContainerEdits(
        env={"K": "b", "L": "b"},
        devices=(DeviceNode("/dev/x", "/dev/b"), DeviceNode("/dev/y", "/dev/y")),
        cdi_devices=("v/c=1", "v/c=2"),
    )
    merged = a.merged(b)
    assert dict(merged.env) == {"K": "a", "L": "b"}
    assert [d.host_path for d in merged.devices] == ["/dev/a", "/dev/y"]
    assert merged.cdi_devices == ("v/c=1", "v/c=2")


def test_poolset_rejects_duplicate_names_and_orders_pools() -> None:
    p1 = Pool(name="b", resource_name="gpu.deckhouse.io/b")
    p2 = Pool(name="a", resource_name="gpu.deckhouse.io/a")
    assert PoolSet((p1, p2)).names() == ["a", "b"]
    with pytest.raises(ValueError, match="duplicate"):
        PoolSet((p1, p1))
