"""Our server called by grpcio's client, the reference peer: answers, statuses, streams and stops."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from hcs_deviceplugin.rpc.server import RpcServer
from hcs_deviceplugin.rpc.status import Code
from hcs_deviceplugin.rpc.wire import MAX_MESSAGE_BYTES
from tests.rpc.conftest import WAIT, Methods, begin_graceful_stop, unary


def test_unary_echo_of_a_request_larger_than_one_frame(channel: grpc.Channel) -> None:
    request = bytes(range(256)) * 1024  # 256 KiB: many DATA frames, over the default 64 KiB window
    assert unary(channel, "/t.T/Echo")(request, timeout=WAIT) == request


def test_an_answer_far_larger_than_the_window_and_the_unsent_limit(server: RpcServer) -> None:
    request = bytes(range(256)) * 32 * 1024  # 8 MiB: flow control and socket drain both pace it
    with grpc.insecure_channel(
        f"unix:{server.path}",
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
    ) as chan:
        assert unary(chan, "/t.T/Echo")(request, timeout=WAIT) == request


def test_empty_request_and_answer(channel: grpc.Channel) -> None:
    assert unary(channel, "/t.T/Echo")(b"", timeout=WAIT) == b""


@pytest.mark.parametrize(
    ("method", "request_bytes", "code", "details"),
    [
        pytest.param(
            "/t.T/Nope", b"", grpc.StatusCode.UNIMPLEMENTED, "Method not found: /t.T/Nope", id="unknown"
        ),
        pytest.param(
            "/t.T/Fail",
            "boom ü".encode(),
            grpc.StatusCode.UNKNOWN,
            "Exception calling application: boom ü",
            id="handler-raises",
        ),
        pytest.param(
            "/t.T/Abort",
            "5:no pod 日本 100% \n ok".encode(),
            grpc.StatusCode.NOT_FOUND,
            "no pod 日本 100% \n ok",
            id="abort-unicode",
        ),
        pytest.param("/t.T/Abort", b"9:", grpc.StatusCode.FAILED_PRECONDITION, "", id="abort-no-details"),
    ],
)
def test_statuses_reach_grpcio_intact(
    channel: grpc.Channel, method: str, request_bytes: bytes, code: grpc.StatusCode, details: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        unary(channel, method)(request_bytes, timeout=WAIT)
    error: Any = caught.value
    assert (error.code(), error.details()) == (code, details)


def test_handler_message_that_is_not_valid_unicode_still_gets_a_status(channel: grpc.Channel) -> None:
    """A lone surrogate (from undecodable bytes) cannot be UTF-8 encoded; the status must still go out."""
    with pytest.raises(grpc.RpcError) as caught:
        unary(channel, "/t.T/Fail")(b"bad \xff byte", timeout=WAIT)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details().startswith("Exception calling application: bad ")
    assert unary(channel, "/t.T/Echo")(b"still serving", timeout=WAIT) == b"still serving"


def test_request_over_the_message_limit_is_resource_exhausted(server: RpcServer) -> None:
    with grpc.insecure_channel(
        f"unix:{server.path}", options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES + 1024)]
    ) as chan:
        with pytest.raises(grpc.RpcError) as caught:
            unary(chan, "/t.T/Echo")(b"x" * (MAX_MESSAGE_BYTES + 1), timeout=WAIT)
        error: Any = caught.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert unary(chan, "/t.T/Echo")(b"ok", timeout=WAIT) == b"ok"


def test_stream_of_more_than_the_window_arrives_whole_and_in_order(channel: grpc.Channel) -> None:
    call = channel.unary_stream("/t.T/Stream", request_serializer=None, response_deserializer=None)
    answers = list(call(b"300:1000", timeout=WAIT))
    assert answers == [bytes([i % 256]) * 1000 for i in range(300)]


def test_client_cancel_ends_the_stream_and_frees_its_thread(channel: grpc.Channel, methods: Methods) -> None:
    call = channel.unary_stream("/t.T/Forever", request_serializer=None, response_deserializer=None)
    responses: Any = call(b"100", timeout=WAIT)
    assert next(responses) == b"x" * 100
    responses.cancel()
    assert methods.stream_ended.wait(WAIT), "the stream's generator was never closed"
    assert not methods.contexts[0].is_active()
    assert unary(channel, "/t.T/Echo")(b"after", timeout=WAIT) == b"after"


def test_a_stream_the_server_cancels_delivers_what_it_sent_first(channel: grpc.Channel) -> None:
    """Every time: a RST_STREAM right behind the last message lost it about once in ten calls."""
    call = channel.unary_stream("/t.T/Last", request_serializer=None, response_deserializer=None)
    for i in range(40):
        responses: Any = call(b"last %d" % i, timeout=WAIT)
        received = []
        with pytest.raises(grpc.RpcError):
            received.extend(responses)
        assert (received, responses.code()) == ([b"last %d" % i], grpc.StatusCode.CANCELLED)


def test_stop_with_grace_lets_a_unary_call_in_flight_answer(server: RpcServer, methods: Methods) -> None:
    with grpc.insecure_channel(f"unix:{server.path}") as chan:
        future = unary(chan, "/t.T/Hold").future(b"held", timeout=WAIT)
        assert methods.entered.wait(WAIT)
        stopper = begin_graceful_stop(server)
        methods.release.set()
        assert future.result(timeout=WAIT) == b"held"
        stopper.join(WAIT)


def test_a_stream_ended_during_a_graceful_stop_reaches_the_client_whole(
    server: RpcServer, methods: Methods
) -> None:
    """How a pool drains: its owner ends the stream, and the stop's grace lets the last list and
    the status out before the connection is cut (grpcio drops a message a hang-up follows)."""
    with grpc.insecure_channel(f"unix:{server.path}") as chan:
        call = chan.unary_stream("/t.T/Closing", request_serializer=None, response_deserializer=None)
        responses: Any = call(b"", timeout=WAIT)
        assert next(responses) == b"first"
        stopper = begin_graceful_stop(server)
        methods.release.set()
        assert list(responses) == [b"last"]
        assert responses.code() == grpc.StatusCode.OK
        stopper.join(WAIT)


def test_stop_without_grace_cuts_calls_in_flight(server: RpcServer, methods: Methods) -> None:
    with grpc.insecure_channel(f"unix:{server.path}") as chan:
        future = unary(chan, "/t.T/Hold").future(b"held", timeout=WAIT)
        assert methods.entered.wait(WAIT)
        stopped = server.stop(None)
        with pytest.raises(grpc.RpcError) as caught:
            future.result(timeout=WAIT)  # at once, though the handler still runs
        error: Any = caught.value
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        methods.release.set()
        assert stopped.wait(WAIT)


def test_many_concurrent_calls_on_one_connection(channel: grpc.Channel) -> None:
    echo = unary(channel, "/t.T/Echo")
    futures = [echo.future(str(i).encode() * 1000, timeout=WAIT) for i in range(50)]
    assert [f.result(timeout=WAIT) for f in futures] == [str(i).encode() * 1000 for i in range(50)]


def test_code_numbers_match_grpcio() -> None:
    assert {c.name: c.value for c in Code} == {s.name: s.value[0] for s in grpc.StatusCode}


def test_a_handler_error_of_any_length_reaches_grpcio_as_its_status(channel: grpc.Channel) -> None:
    """grpcio drops trailers over its 8 KiB metadata limit; the details are cut so the status survives."""
    with pytest.raises(grpc.RpcError) as caught:
        unary(channel, "/t.T/Fail")("é".encode() * 50_000, timeout=WAIT)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details().startswith("Exception calling application: éé")
