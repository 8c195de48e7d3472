"""The kubelet-facing API of a pool, over real unix sockets against the kubelet simulator."""

from __future__ import annotations

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.model import Health, HealthEvent
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


def plugin_stub(node: Node, pool: str) -> tuple[grpc.Channel, pb_grpc.DevicePluginStub]:
    channel = grpc.insecure_channel(f"unix:{node.plugin_dir / f'hcs-gpu.deckhouse.io_{pool}.sock'}")
    return channel, pb_grpc.DevicePluginStub(channel)


def test_registration_request_contents(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", H100[0], H100[1]), card_pool("infer", H100[2])))
    node.start_daemon()
    node.wait_registered("train", "infer")
    accepted = {r.resource_name: r for r in node.kubelet.registrations if r.accepted}
    assert set(accepted) == {resource("train"), resource("infer")}
    record = accepted[resource("train")]
    assert record.version == "v1beta1"
    assert record.endpoint == "hcs-gpu.deckhouse.io_train.sock"
    assert (node.plugin_dir / record.endpoint).is_socket()
    assert record.get_preferred_allocation_available is True
    assert record.pre_start_required is False
    options = node.kubelet.resource(resource("train")).options
    assert (
        options is not None and options.get_preferred_allocation_available and not options.pre_start_required
    )


def test_list_and_watch_sends_full_list_then_updates(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", H100[0], H100[1])))
    node.start_daemon()
    node.wait_registered("train")
    view = node.kubelet.resource(resource("train"))
    assert view.healthy == {H100[0], H100[1]} and not view.unhealthy
    assert view.numa == {H100[0]: [0], H100[1]: [0]}
    node.write_pools(pool_doc(card_pool("train", H100[0], H100[1], H100[2])))
    node.kubelet.wait_for(lambda k: H100[2] in k.resource(resource("train")).healthy, WAIT, "third card")
    after = node.kubelet.resource(resource("train"))
    assert after.numa[H100[2]] == [1]
    assert (after.stream_opens, after.registrations) == (view.stream_opens, view.registrations)
    assert after.snapshots == view.snapshots + 1


def test_allocate_whole_card_returns_the_backends_container_edits(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", H100[0], H100[1])))
    node.start_daemon()
    node.wait_registered("train")
    record = node.kubelet.allocate("pod-a", "main", resource("train"), 2)
    assert sorted(record.device_ids) == sorted([H100[0], H100[1]])
    response = record.response
    assert sorted(response.envs["HCS_SIM_VISIBLE_DEVICES"].split(",")) == sorted([H100[0], H100[1]])
    assert {d.container_path for d in response.devices} == {"/dev/hcs-sim/card0", "/dev/hcs-sim/card1"}
    assert all(d.permissions == "rw" for d in response.devices)
    assert not response.cdi_devices, "deviceSpecs delivery (the default) names no CDI device"


def test_time_slice_replicas_map_back_to_their_card(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("shared", H100[0], H100[1], slicesPerUnit=4)))
    node.start_daemon()
    node.wait_registered("shared")
    view = node.kubelet.resource(resource("shared"))
    assert view.healthy == {f"{c}::{n}" for c in H100[:2] for n in range(4)}
    channel, stub = plugin_stub(node, "shared")
    with channel:
        answer = stub.Allocate(
            pb.AllocateRequest(
                container_requests=[
                    pb.ContainerAllocateRequest(devices_ids=[f"{H100[1]}::0", f"{H100[1]}::3"])
                ]
            ),
            timeout=WAIT,
        )
    (container,) = answer.container_responses
    assert container.envs["HCS_SIM_VISIBLE_DEVICES"] == H100[1]
    assert [d.container_path for d in container.devices] == ["/dev/hcs-sim/card1"]
    # Through the simulator, a 2-replica request is spread over two cards by the preferred allocation.
    record = node.kubelet.allocate("pod-b", "main", resource("shared"), 2)
    assert {d.split("::")[0] for d in record.device_ids} == {H100[0], H100[1]}


@pytest.mark.parametrize(
    "bad_id", ["GPU-does-not-exist", f"{H100[0]}::9", ""], ids=["unknown", "replica", "empty"]
)
def test_allocate_of_an_unknown_id_is_invalid_argument_and_changes_nothing(node: Node, bad_id: str) -> None:
    node.write_pools(pool_doc(card_pool("train", H100[0], H100[1])))
    node.start_daemon()
    node.wait_registered("train")
    before = node.kubelet.resource(resource("train"))
    channel, stub = plugin_stub(node, "train")
    with channel:
        with pytest.raises(grpc.RpcError) as err:
            stub.Allocate(
                pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=[H100[0], bad_id])]
                ),
                timeout=WAIT,
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "unknown device ids" in (err.value.details() or "")
        ok = stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[H100[0]])]),
            timeout=WAIT,
        )
    assert ok.container_responses[0].envs["HCS_SIM_VISIBLE_DEVICES"] == H100[0]
    after = node.kubelet.resource(resource("train"))
    assert (after.healthy, after.snapshots, after.registrations) == (
        before.healthy,
        before.snapshots,
        before.registrations,
    )


def test_allocate_of_an_unhealthy_id_is_invalid_argument(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", H100[0], H100[1])))
    node.start_daemon()
    node.wait_registered("train")
    node.backend.inject(HealthEvent(H100[1], Health.UNHEALTHY, "XID 79"))
    node.kubelet.wait_for(lambda k: H100[1] in k.resource(resource("train")).unhealthy, WAIT, "unhealthy")
    channel, stub = plugin_stub(node, "train")
    with channel, pytest.raises(grpc.RpcError) as err:
        stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[H100[1]])]),
            timeout=WAIT,
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unhealthy" in (err.value.details() or "")


def test_preferred_allocation_honours_must_include_and_size(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("shared", *H100[:3], slicesPerUnit=2)))
    node.start_daemon()
    node.wait_registered("shared")
    available = sorted(node.kubelet.resource(resource("shared")).healthy)
    channel, stub = plugin_stub(node, "shared")
    with channel:
        answer = stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available,
                        must_include_deviceIDs=[f"{H100[2]}::1"],
                        allocation_size=3,
                    )
                ]
            ),
            timeout=WAIT,
        )
        options = stub.GetDevicePluginOptions(pb.Empty(), timeout=WAIT)
        prestart = stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=[H100[0]]), timeout=WAIT)
    chosen = list(answer.container_responses[0].deviceIDs)
    assert len(chosen) == 3 and chosen[0] == f"{H100[2]}::1" and set(chosen) <= set(available)
    assert len({c.split("::")[0] for c in chosen}) == 3, "replicas spread over distinct cards"
    assert options.get_preferred_allocation_available and not options.pre_start_required
    assert prestart == pb.PreStartContainerResponse()


def test_health_change_reaches_kubelet_and_comes_back(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("shared", H100[0], slicesPerUnit=2), card_pool("other", H100[1])))
    node.start_daemon()
    node.wait_registered("shared", "other")
    replicas = {f"{H100[0]}::0", f"{H100[0]}::1"}
    other_before = node.kubelet.resource(resource("other")).snapshots
    node.backend.inject(HealthEvent(H100[0], Health.UNHEALTHY, "XID 79"))
    node.kubelet.wait_for(lambda k: k.resource(resource("shared")).unhealthy == replicas, WAIT, "unhealthy")
    assert not node.kubelet.resource(resource("shared")).healthy
    node.backend.inject(HealthEvent(H100[0], Health.HEALTHY, "recovered"))
    node.kubelet.wait_for(lambda k: k.resource(resource("shared")).healthy == replicas, WAIT, "healthy again")
    assert node.kubelet.resource(resource("other")).snapshots == other_before, "other pool untouched"


@pytest.mark.parametrize(("placement", "cards"), [("spread", 2), ("pack", 1)])
def test_pool_replica_placement_reaches_the_allocator(node: Node, placement: str, cards: int) -> None:
    node.write_pools(
        pool_doc(card_pool("shared", H100[0], H100[1], slicesPerUnit=4, replicaPlacement=placement))
    )
    node.start_daemon()
    node.wait_registered("shared")
    record = node.kubelet.allocate("pod", "main", resource("shared"), 2)
    assert len({d.split("::")[0] for d in record.device_ids}) == cards
