"""The DevicePlugin methods over the pool's real socket (no kubelet needed: the server serves first
and only then registers, so it answers while its Register keeps failing)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.model import ContainerEdits, Pool, Unit
from hcs_deviceplugin.plugin.server import PluginServer
from tests.plugin.conftest import WAIT, ServerFactory, edits, pool, units
from tests.waiting import wait_until

Calls = list[tuple[str, list[str]]]


def serving(server: PluginServer) -> PluginServer:
    wait_until(lambda: server.status().server_generation >= 1, what="the pool serves its socket")
    return server


@pytest.fixture
def calls() -> Calls:
    return []


@pytest.fixture
def stub(make_server: ServerFactory, calls: Calls) -> Iterator[pb_grpc.DevicePluginStub]:
    def listener(pool_name: str, ids: Sequence[str]) -> None:
        calls.append((pool_name, list(ids)))

    server = serving(make_server(("u0", "u1", "bad"), on_allocate=listener))
    server.update(pool(), units("u0", "u1", "bad", unhealthy=["bad"]))
    with grpc.insecure_channel(f"unix:{server.socket_path}") as channel:
        yield pb_grpc.DevicePluginStub(channel)


def allocate(*ids: str) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids))])


def test_allocate_answers_and_tells_the_listener(stub: pb_grpc.DevicePluginStub, calls: Calls) -> None:
    response = stub.Allocate(allocate("u0", "u1"), timeout=WAIT)
    assert response.container_responses[0].envs["UNITS"] == "u0,u1"
    assert calls == [("a", ["u0", "u1"])]


@pytest.mark.parametrize(("ids", "why"), [(("u0", "nope"), "unknown"), (("bad",), "unhealthy")])
def test_allocate_refuses_unknown_or_unhealthy_ids_and_tells_nobody(
    stub: pb_grpc.DevicePluginStub, calls: Calls, ids: tuple[str, ...], why: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Allocate(allocate(*ids), timeout=WAIT)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert why in (caught.value.details() or "")
    assert calls == []  # no hold is taken for a refused request


def test_options_and_preferred_allocation(stub: pb_grpc.DevicePluginStub) -> None:
    options = stub.GetDevicePluginOptions(pb.Empty(), timeout=WAIT)
    assert options.get_preferred_allocation_available
    request = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=["u0", "u1"], must_include_deviceIDs=["u1"], allocation_size=1
            )
        ]
    )
    response = stub.GetPreferredAllocation(request, timeout=WAIT)
    assert list(response.container_responses[0].deviceIDs) == ["u1"]


def test_a_backend_that_cannot_describe_the_units_refuses_clearly(
    make_server: ServerFactory, calls: Calls
) -> None:
    server = serving(make_server(("unready-0",)))
    server.update(pool(), units("unready-0"))
    with (
        grpc.insecure_channel(f"unix:{server.socket_path}") as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        pb_grpc.DevicePluginStub(channel).Allocate(allocate("unready-0"), timeout=WAIT)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "its sharing daemon is not running" in (caught.value.details() or "")
    assert calls == []


@dataclass
class Counted:
    """A serving pool whose edits function and Allocate listener record every call."""

    server: PluginServer
    stub: pb_grpc.DevicePluginStub
    edits_asked: list[list[str]]
    holds: Calls


@pytest.fixture
def counted(make_server: ServerFactory) -> Iterator[Counted]:
    asked: list[list[str]] = []
    holds: Calls = []

    def counting_edits(p: Pool, chosen: Sequence[Unit]) -> ContainerEdits:
        asked.append([u.id for u in chosen])
        return edits(p, chosen)

    def listener(pool_name: str, ids: Sequence[str]) -> None:
        holds.append((pool_name, list(ids)))

    server = serving(make_server(("u0", "u1"), on_allocate=listener, edits=counting_edits))
    with grpc.insecure_channel(f"unix:{server.socket_path}") as channel:
        yield Counted(server, pb_grpc.DevicePluginStub(channel), asked, holds)


def test_the_same_ids_asked_again_are_answered_from_the_snapshot_and_held_again(counted: Counted) -> None:
    first = counted.stub.Allocate(allocate("u0", "u1"), timeout=WAIT)
    again = counted.stub.Allocate(allocate("u0", "u1"), timeout=WAIT)
    other = counted.stub.Allocate(allocate("u1"), timeout=WAIT)
    assert first == again and again.container_responses[0].envs["UNITS"] == "u0,u1"
    assert other.container_responses[0].envs["UNITS"] == "u1"
    assert counted.edits_asked == [["u0", "u1"], ["u1"]]  # edits once per id list
    assert counted.holds == [("a", ["u0", "u1"]), ("a", ["u0", "u1"]), ("a", ["u1"])]  # a hold every time


def test_a_new_unit_list_or_health_drops_the_kept_answers(counted: Counted) -> None:
    counted.stub.Allocate(allocate("u0"), timeout=WAIT)
    counted.server.update(pool(), units("u0", "u1", "u2"))
    counted.stub.Allocate(allocate("u0"), timeout=WAIT)
    counted.server.update(pool(), units("u0", "u1", "u2", unhealthy=["u0"]))
    with pytest.raises(grpc.RpcError) as caught:
        counted.stub.Allocate(allocate("u0"), timeout=WAIT)  # a kept answer must not outlive health
    assert "unhealthy" in (caught.value.details() or "")
    assert counted.edits_asked == [["u0"], ["u0"]]


def test_forgotten_answers_are_computed_again_on_the_same_list(counted: Counted) -> None:
    counted.stub.Allocate(allocate("u0"), timeout=WAIT)
    version = counted.server.state.snapshot.version
    counted.server.state.forget_answers()  # a backend rediscovered: same units, maybe other edits
    counted.stub.Allocate(allocate("u0"), timeout=WAIT)
    assert counted.edits_asked == [["u0"], ["u0"]]
    assert counted.server.state.snapshot.version == version  # streams are not woken for it
