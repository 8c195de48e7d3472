"""ResourceSlices: every attribute for each vendor's (simulated) hardware, valid under the 1.37
schema and rules, written through the API; a health change becomes a device taint; a restart
supersedes the old generation; withdrawing deletes them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from hcs_deviceplugin.dra.devices import DraDevice, card_attributes, dra_device_name, partition_attributes
from hcs_deviceplugin.dra.resourceslice import MAX_DEVICES_PER_SLICE, build_slices, slice_name
from hcs_deviceplugin.dra.slices import SliceApi, SlicePublisher
from hcs_deviceplugin.model import Card, Health, Partition
from tests.dra.rig import DRIVER, NODE, Rig, dra_rig
from tests.dra.sliceschema import problems
from tests.pools.fakeapiserver import FakeApiServer

TIMEOUT = 5.0
CARD_ATTRIBUTES = {"vendor", "model", "uuid", "index", "backend", "pciAddress", "numaNode", "pool"}


@pytest.fixture
def rig() -> Iterator[Rig]:
    with dra_rig() as rig:
        rig.api.slice_validator = problems
        yield rig


@pytest.fixture
def publisher(rig: Rig) -> Iterator[SlicePublisher]:
    slices = SlicePublisher(SliceApi(rig.api.api_client()), DRIVER, NODE)
    slices.start()
    yield slices
    slices.stop()


def devices_of(slices: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for s in slices.values() for d in s["spec"].get("devices", [])}


def test_every_vendor_s_cards_are_published_with_every_attribute(rig: Rig, publisher: SlicePublisher) -> None:
    publisher.update(rig.devices)
    assert rig.api.wait_resource_slices(lambda s: len(devices_of(s)) == len(rig.devices), TIMEOUT)
    published = devices_of(rig.api.resource_slices())
    vendors = set()
    for device in rig.devices:
        entry = published[device.name]
        attributes = {k: next(iter(v.values())) for k, v in entry["attributes"].items()}
        assert set(attributes) >= CARD_ATTRIBUTES, device.name
        assert attributes["uuid"] == device.card_id and attributes["pool"] == "team-a"
        assert attributes["resource.kubernetes.io/pciBusID"] == attributes["pciAddress"]
        assert entry["capacity"]["memory"]["value"] == str(device.memory_bytes)
        assert "taints" not in entry
        vendors.add(attributes["vendor"])
    assert vendors == {"nvidia", "ascend", "hygon", "cambricon"}
    (only,) = rig.api.resource_slices().values()
    assert only["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert only["spec"]["nodeName"] == NODE and only["spec"]["driver"] == DRIVER


def test_the_fake_apiserver_refuses_a_slice_the_1_37_schema_refuses(rig: Rig) -> None:
    (body,) = build_slices(DRIVER, NODE, rig.devices[:1], 1)
    body["spec"]["devices"][0]["attributes"]["vendor"] = {"string": "x", "int": 1}
    body["spec"]["devices"][0]["unknownField"] = True
    assert problems(body), "the checker must be able to fail"
    body["spec"]["devices"][0].pop("unknownField")
    assert any("exactly one value" in p for p in problems(body))


def test_a_health_change_taints_the_device_and_recovery_removes_the_taint(
    rig: Rig, publisher: SlicePublisher
) -> None:
    publisher.update(rig.devices)
    sick = rig.devices[0]
    assert rig.api.wait_resource_slices(lambda s: sick.name in devices_of(s), TIMEOUT)
    publisher.update([replace(d, health=Health.UNHEALTHY) if d is sick else d for d in rig.devices])

    def tainted(slices: dict[str, Any]) -> bool:
        return devices_of(slices)[sick.name].get("taints") == [
            {"key": f"{DRIVER}/unhealthy", "value": "true", "effect": "NoSchedule"}
        ]

    assert rig.api.wait_resource_slices(tainted, TIMEOUT)
    assert next(iter(rig.api.resource_slices().values()))["spec"]["pool"]["generation"] == 2
    publisher.update(rig.devices)
    assert rig.api.wait_resource_slices(lambda s: "taints" not in devices_of(s)[sick.name], TIMEOUT)


def test_a_restarted_publisher_supersedes_the_old_generation_and_withdraw_deletes(rig: Rig) -> None:
    first = SlicePublisher(SliceApi(rig.api.api_client()), DRIVER, NODE)
    first.start()
    first.update(rig.devices)
    assert rig.api.wait_resource_slices(lambda s: len(s) == 1, TIMEOUT)
    first.stop()
    second = SlicePublisher(SliceApi(rig.api.api_client()), DRIVER, NODE)
    second.start()
    try:
        second.update(rig.devices[:2])

        def newer(slices: dict[str, Any]) -> bool:
            return any(s["spec"]["pool"]["generation"] == 2 for s in slices.values())

        assert rig.api.wait_resource_slices(newer, TIMEOUT)
        assert set(devices_of(rig.api.resource_slices())) == {d.name for d in rig.devices[:2]}
        second.withdraw()
        assert rig.api.wait_resource_slices(lambda s: not s, TIMEOUT)
    finally:
        second.stop()


def test_many_devices_are_split_into_slices_of_one_pool() -> None:
    devices = [
        DraDevice(
            f"dev-{i}", "p", f"c{i}", f"c{i}", "b", "dra:x/p", Health.UNHEALTHY, "k/c=x", {"uuid": f"c{i}"}
        )
        for i in range(MAX_DEVICES_PER_SLICE * 2 + 1)
    ]
    slices = build_slices(DRIVER, NODE, devices, 7)
    assert [len(s["spec"]["devices"]) for s in slices] == [64, 64, 1]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    assert [s["metadata"]["name"] for s in slices] == [slice_name(NODE, DRIVER, i) for i in range(3)]
    assert all(not problems(s) for s in slices)


@pytest.mark.parametrize(
    ("hardware_id", "expected"),
    [
        pytest.param("0000-17-00-0", "0000-17-00-0", id="already-a-label"),
        pytest.param("GPU-0A", "gpu-0a-", id="upper-case-gets-a-hash"),
        pytest.param("0000:17:00.0", "0000-17-00-0-", id="pci-address"),
        pytest.param("---", "dev-", id="nothing-left"),
    ],
)
def test_device_names_are_dns_labels(hardware_id: str, expected: str) -> None:
    name = dra_device_name(hardware_id)
    assert name.startswith(expected) and len(name) <= 63
    assert dra_device_name("a" * 80) != dra_device_name("a" * 81)


def test_link_keys_profile_and_parent_are_attributes() -> None:
    card = Card(
        id="c0",
        backend="b",
        vendor="v",
        model="m",
        index=3,
        numa_node=1,
        pci_address="0000:01:00.0",
        attributes={"linkGroup": "1", "linkModule": "4", "other": "x"},
    )
    assert card_attributes(card) == {
        "vendor": "v",
        "model": "m",
        "uuid": "c0",
        "index": 3,
        "backend": "b",
        "pciAddress": "0000:01:00.0",
        "numaNode": 1,
        "linkGroup": "1",
        "linkModule": "4",
    }
    part = partition_attributes(card, Partition("p0", "c0", "1g.10gb"))
    assert (part["uuid"], part["profile"], part["parent"]) == ("p0", "1g.10gb", "c0")


def test_fake_apiserver_slice_routes_without_a_validator() -> None:
    with FakeApiServer() as api:
        slices = SliceApi(api.api_client())
        (body,) = build_slices(DRIVER, NODE, [], 1)
        slices.create(body)
        assert [s["metadata"]["name"] for s in slices.list_own(DRIVER, NODE)] == [body["metadata"]["name"]]
        assert slices.list_own(DRIVER, "other-node") == []
        slices.delete(body["metadata"]["name"])
        assert api.resource_slices() == {}


def test_the_slices_are_owned_by_the_node_so_they_go_with_it(rig: Rig) -> None:
    rig.api.put_node(NODE)
    with rig.api.api_client() as client:
        node = client.request("GET", f"/api/v1/nodes/{NODE}", timeout=(5.0, 5.0))
    node_uid = node["metadata"]["uid"]
    assert node_uid
    slices = SlicePublisher(SliceApi(rig.api.api_client()), DRIVER, NODE)
    slices.start()
    try:
        slices.update(rig.devices)
        assert rig.api.wait_resource_slices(lambda s: len(devices_of(s)) == len(rig.devices), TIMEOUT)
    finally:
        slices.stop()
    for body in rig.api.resource_slices().values():
        assert body["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": True}
        ]


def test_without_a_node_object_the_slices_are_published_unowned(rig: Rig, publisher: SlicePublisher) -> None:
    publisher.update(rig.devices)
    assert rig.api.wait_resource_slices(lambda s: len(devices_of(s)) == len(rig.devices), TIMEOUT)
    assert all("ownerReferences" not in s["metadata"] for s in rig.api.resource_slices().values())


@pytest.mark.parametrize("code", [403, 500])
def test_a_node_that_may_not_be_read_leaves_the_slices_unowned_and_a_failing_read_is_retried(
    rig: Rig, code: int
) -> None:
    rig.api.put_node(NODE)
    rig.api.fail_next_node_reads(1, code)
    slices = SlicePublisher(SliceApi(rig.api.api_client()), DRIVER, NODE)
    slices.start()
    try:
        slices.update(rig.devices)
        assert rig.api.wait_resource_slices(lambda s: len(devices_of(s)) == len(rig.devices), TIMEOUT)
    finally:
        slices.stop()
    owned = ["ownerReferences" in s["metadata"] for s in rig.api.resource_slices().values()]
    # 403: published at once without an owner; 500: retried, then published owned.
    assert owned == [code == 500]
