"""The DevicePlugin methods over the pool's real socket (no kubelet needed: the server serves first
and only then registers, so it answers while its Register keeps failing)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as wire
from hcs_deviceplugin.model import ContainerEdits, Pool, Unit
from hcs_deviceplugin.plugin.server import PluginServer
from hcs_deviceplugin.plugin.servicer import DevicePluginServicer
from hcs_deviceplugin.plugin.state import Answer, PoolState
from hcs_deviceplugin.rpc.calls import CallContext, Encoded
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
    raw: grpc.UnaryUnaryMultiCallable[bytes, pb.AllocateResponse]
    """Allocate with the request's bytes as given (grpcio sends them as they are)."""


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
        raw = channel.unary_unary(
            "/v1beta1.DevicePlugin/Allocate",
            request_serializer=bytes,
            response_deserializer=pb.AllocateResponse.FromString,
        )
        yield Counted(server, pb_grpc.DevicePluginStub(channel), asked, holds, raw)


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


UNKNOWN_FIELD = b"\xf8\x06\x01"
"""Field 111, varint 1: a field this API does not have, which a newer kubelet could send."""


def test_the_same_ids_encoded_another_way_get_the_same_answer_from_their_own_entry(counted: Counted) -> None:
    """The book is keyed by the request's bytes: another encoding of the same ids misses it and is
    answered afresh, rightly; the same bytes again are answered from the book."""
    plain = allocate("u0", "u1").SerializeToString()
    container = pb.ContainerAllocateRequest(devices_ids=["u0", "u1"]).SerializeToString()
    unknown_inside = b"\x0a" + bytes([len(container) + 3]) + UNKNOWN_FIELD + container
    encodings = [plain, UNKNOWN_FIELD + plain, plain + UNKNOWN_FIELD, unknown_inside]
    answers = [counted.raw(request, timeout=WAIT) for request in encodings]
    assert all(answer == answers[0] for answer in answers)
    assert answers[0].container_responses[0].envs["UNITS"] == "u0,u1"
    assert counted.edits_asked == [["u0", "u1"]] * 4  # four keys, four answers computed
    assert counted.raw(plain, timeout=WAIT) == answers[0]
    assert counted.edits_asked == [["u0", "u1"]] * 4  # the same bytes: from the book
    assert counted.holds == [("a", ["u0", "u1"])] * 5  # and every call holds


def test_a_kept_answer_is_sent_as_stored_without_parsing_the_request(counted: Counted) -> None:
    """What the book holds for a request's bytes is what goes out, and the request is not decoded:
    bytes that are no AllocateRequest at all are answered from the book (and held) once kept."""
    stored = pb.AllocateResponse(
        container_responses=[pb.ContainerAllocateResponse(envs={"FROM": "book"})]
    ).SerializeToString()
    counted.server.state.snapshot.remember(b"\xff", Answer((("u1",),), Encoded(stored)))
    answer = counted.raw(b"\xff", timeout=WAIT)
    assert answer.container_responses[0].envs == {"FROM": "book"}
    assert counted.holds == [("a", ["u1"])] and counted.edits_asked == []


def test_bytes_that_are_no_request_fail_as_unparseable_and_are_not_kept(counted: Counted) -> None:
    for _ in range(2):
        with pytest.raises(grpc.RpcError) as caught:
            counted.raw(b"\x0a\x05u0", timeout=WAIT)  # a length past the end
        assert caught.value.code() is grpc.StatusCode.INTERNAL
        assert "could not parse the request" in (caught.value.details() or "")
    assert counted.server.state.snapshot.answers == {}
    assert counted.holds == [] and counted.edits_asked == []


def test_a_refused_request_is_not_kept(counted: Counted) -> None:
    for _ in range(2):
        with pytest.raises(grpc.RpcError) as caught:
            counted.stub.Allocate(allocate("u0", "nope"), timeout=WAIT)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert counted.server.state.snapshot.answers == {}
    assert counted.holds == []


def test_a_list_changed_just_before_the_close_still_goes_out_before_the_stream_ends() -> None:
    """A drain advertises the empty list, then closes: the stream's thread may wake only after
    the close, and must send the list rather than end without it."""
    state = PoolState(pool(), units("u0", "u1"))
    servicer = DevicePluginServicer(state, edits)
    stream = servicer.ListAndWatch(wire.Empty(), CallContext("/v1beta1.DevicePlugin/ListAndWatch"))
    assert len(next(stream).devices) == 2
    state.update(pool(), ())
    servicer.close()
    assert [len(message.devices) for message in stream] == [0]


def test_a_stream_counts_as_delivering_once_its_first_list_is_handed_over() -> None:
    """What ``run`` waits for before its after-start work: a stream kubelet opened whose first list
    is still ours to send does not count yet (work woken then would hold that list back)."""
    state = PoolState(pool(), units("u0", "u1"))
    changes: list[int] = []
    servicer = DevicePluginServicer(state, edits, on_stream=changes.append)
    stream = servicer.ListAndWatch(wire.Empty(), CallContext("/v1beta1.DevicePlugin/ListAndWatch"))
    assert len(next(stream).devices) == 2  # the RPC server holds it; it has not asked for the next
    assert (servicer.open_streams, servicer.delivering_streams, changes) == (1, 0, [1])
    state.update(pool(), units("u0"))
    assert len(next(stream).devices) == 1  # asking for the next: the first was handed over
    assert (servicer.open_streams, servicer.delivering_streams, changes) == (1, 1, [1, 1])
    servicer.close()
    assert list(stream) == []
    assert (servicer.open_streams, servicer.delivering_streams) == (0, 0)
