"""Our server against clients grpcio would never be: hand-written HTTP/2 on bare sockets.

Each test also checks the server still serves a well-behaved client afterwards, where that is the
point: one bad peer must cost only its own connection.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable

import grpc
import h2.errors
import h2.events
import hyperframe.frame
import pytest

from hcs_deviceplugin.rpc import server as server_module
from hcs_deviceplugin.rpc.server import RpcServer
from hcs_deviceplugin.rpc.wire import MAX_MESSAGE_BYTES, frame
from tests.rpc.conftest import WAIT, FrameSplitter, GoAway, Methods, RawClient, goaway_of, unary
from tests.waiting import wait_until

ClientFactory = Callable[[], RawClient]


def serves(server: RpcServer) -> bool:
    with grpc.insecure_channel(f"unix:{server.path}") as chan:
        return bool(unary(chan, "/t.T/Echo")(b"ok", timeout=WAIT) == b"ok")


def backlog(server: RpcServer) -> int:
    """The most bytes any call of ``server`` has queued for its client."""
    with server._lock:
        connections = list(server._connections)
    return max((c.queued for conn in connections for c in list(conn._calls.values())), default=0)


def held_back(server: RpcServer) -> bool:
    """Some call of ``server`` has bytes the client has not taken: queued, or waiting for the socket."""
    with server._lock:
        connections = list(server._connections)
    return backlog(server) > 0 or any(conn._unsent for conn in connections)


def streaming(raw_client: ClientFactory, size: bytes) -> RawClient:
    """A new raw client with ``/t.T/Forever`` open on stream 1, sending messages of ``size`` bytes."""
    client = raw_client()
    client.handshake()
    client.request("/t.T/Forever", size)
    return client


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (bounded by the socket's timeout)."""
    sock.settimeout(WAIT)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http1"),
        pytest.param(b"\x00\xff garbage \x16\x03\x01" * 20, id="garbage"),
        pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64, id="preface-then-junk"),
    ],
)
def test_a_client_speaking_nonsense_is_dropped_and_others_served(server: RpcServer, opening: bytes) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        sock.connect(str(server.path))
        sock.sendall(opening)
        read_to_eof(sock)  # returns only because the server hung up
    assert serves(server)


def test_a_frame_announcing_more_than_the_frame_size_limit_is_refused_at_its_header(
    raw_client: ClientFactory, server: RpcServer
) -> None:
    client = raw_client()
    client.handshake()
    client.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
    client.sock.sendall(b"\xff\xff\xff\x00\x00\x00\x00\x00\x01" + b"x" * 100)  # 16 MiB DATA, 100 sent
    ended = client.read_until(lambda e: isinstance(e, h2.events.ConnectionTerminated))
    assert isinstance(ended, h2.events.ConnectionTerminated)
    assert ended.error_code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR
    assert serves(server)


def test_a_client_that_never_sends_the_preface_is_dropped(
    server: RpcServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "HANDSHAKE_TIMEOUT_S", 0.2)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        sock.connect(str(server.path))
        read_to_eof(sock)  # the server's SETTINGS, then its hang-up
    assert serves(server)


def test_idle_connections_at_the_limit_make_room_for_a_new_client(
    server: RpcServer, raw_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 3)
    idle = [raw_client() for _ in range(3)]
    for client in idle:
        client.handshake()
        client.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
    assert serves(server)
    wait_until(lambda: sum(hung_up(c) for c in idle) == 1, what="one idle connection was closed for it")


def hung_up(client: RawClient) -> bool:
    """The server closed ``client``'s connection (what it sent before is read and dropped)."""
    while select.select([client.sock], [], [], 0)[0]:
        if not client.sock.recv(65536):
            return True
    return False


def test_connections_all_in_calls_are_kept_and_the_newcomer_refused(
    server: RpcServer, raw_client: ClientFactory, monkeypatch: pytest.MonkeyPatch, methods: Methods
) -> None:
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 2)
    busy = [raw_client() for _ in range(2)]
    for client in busy:
        client.handshake()
        client.request("/t.T/Forever", b"10")
        client.read_until(lambda e: isinstance(e, h2.events.DataReceived))
    late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with late:
        late.connect(str(server.path))
        assert read_to_eof(late) == b""
    for client in busy:
        client.read_until(lambda e: isinstance(e, h2.events.DataReceived) and e.stream_id == 1)


def test_ping_is_answered(raw_client: ClientFactory) -> None:
    client = raw_client()
    client.handshake()
    client.conn.ping(b"8 bytes!")
    client.flush()
    ack = client.read_until(lambda e: isinstance(e, h2.events.PingAckReceived))
    assert isinstance(ack, h2.events.PingAckReceived)
    assert ack.ping_data == b"8 bytes!"


def test_a_request_split_into_one_byte_frames_is_reassembled(raw_client: ClientFactory) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Echo", None, end=False)
    payload = frame("héllo".encode())
    for i in range(len(payload)):
        client.conn.send_data(stream_id, payload[i : i + 1], end_stream=i == len(payload) - 1)
    client.flush()
    assert client.status(stream_id)[b"grpc-status"] == b"0"
    data = b"".join(
        e.data or b""
        for e in client.events
        if isinstance(e, h2.events.DataReceived) and e.stream_id == stream_id
    )
    assert data == payload


def test_a_second_request_message_is_refused_before_the_client_ends(raw_client: ClientFactory) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Echo", None, end=False)
    client.conn.send_data(stream_id, frame(b"one") + frame(b"two"))  # two messages, one DATA frame
    client.flush()
    assert client.status(stream_id)[b"grpc-status"] == b"13"  # INTERNAL


def test_an_oversized_message_is_refused_at_its_prefix_and_the_client_told_to_stop(
    raw_client: ClientFactory,
) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Echo", None, end=False)
    client.conn.send_data(stream_id, b"\x00" + (MAX_MESSAGE_BYTES + 1).to_bytes(4, "big") + b"x" * 100)
    client.flush()
    assert client.status(stream_id)[b"grpc-status"] == b"8"  # RESOURCE_EXHAUSTED
    reset = client.read_until(lambda e: isinstance(e, h2.events.StreamReset))
    assert isinstance(reset, h2.events.StreamReset)
    assert reset.error_code == h2.errors.ErrorCodes.NO_ERROR


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        pytest.param({"content-type": "text/html"}, b"415", b"13", id="not-grpc"),
        pytest.param({"content-type": "application/grpcx"}, b"415", b"13", id="grpc-prefix-only"),
        pytest.param({"content-type": "application/grpc+proto"}, b"200", b"0", id="grpc-proto"),
        pytest.param(  # what grpc-go sends when kubelet dials a bare socket path
            {":authority": "/var/lib/kubelet/device-plugins/a.sock", "user-agent": "grpc-go/1.72.0"},
            b"200",
            b"0",
            id="go-authority",
        ),
        pytest.param(
            {"grpc-timeout": "4999785u", "grpc-accept-encoding": "gzip"}, b"200", b"0", id="go-timeout"
        ),
        pytest.param({"grpc-encoding": "gzip"}, b"200", b"12", id="compressed"),
        pytest.param({":path": "/t.T/Missing"}, b"200", b"12", id="unknown-method"),
    ],
)
def test_request_headers_decide_the_answer(
    raw_client: ClientFactory, headers: dict[str, str], status: bytes, code: bytes
) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request(headers.pop(":path", "/t.T/Echo"), b"hi", extra=headers)
    assert (client.headers(stream_id)[b":status"], client.status(stream_id)[b"grpc-status"]) == (status, code)


def test_a_compressed_message_is_unimplemented(raw_client: ClientFactory) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Echo", None, end=False)
    client.conn.send_data(stream_id, b"\x01" + (2).to_bytes(4, "big") + b"hi", end_stream=True)
    client.flush()
    assert client.status(stream_id)[b"grpc-status"] == b"12"


def test_reset_mid_stream_ends_the_stream_and_the_connection_serves_on(
    raw_client: ClientFactory, methods: Methods
) -> None:
    client = streaming(raw_client, b"100")
    stream_id = 1  # the stream streaming() opened
    client.read_until(lambda e: isinstance(e, h2.events.DataReceived))
    client.conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
    client.flush()
    assert methods.stream_ended.wait(WAIT)
    echo = client.request("/t.T/Echo", b"again")
    assert client.status(echo)[b"grpc-status"] == b"0"


def goaway_frame(last_stream_id: int, error_code: int) -> bytes:
    """A GOAWAY as a client would send it (written raw: h2 refuses to read anything after its own)."""
    return hyperframe.frame.GoAwayFrame(0, last_stream_id=last_stream_id, error_code=error_code).serialize()


def test_a_call_sent_with_the_clients_goaway_is_answered_then_the_connection_closes(
    raw_client: ClientFactory,
) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Echo", None, end=False)
    client.conn.send_data(stream_id, frame(b"last words"), end_stream=True)
    client.sock.sendall(client.conn.data_to_send() + goaway_frame(0, 0))  # one read for the server
    assert client.status(stream_id)[b"grpc-status"] == b"0"
    data = b"".join(e.data or b"" for e in client.events if isinstance(e, h2.events.DataReceived))
    assert data == frame(b"last words")
    with pytest.raises(ConnectionError):
        client.read_until(lambda e: False)


def test_a_stream_outlives_the_clients_goaway_until_the_client_hangs_up(
    raw_client: ClientFactory, methods: Methods
) -> None:
    client = streaming(raw_client, b"100")
    client.read_until(lambda e: isinstance(e, h2.events.DataReceived))
    client.sock.sendall(goaway_frame(0, 0))

    def messages() -> int:
        return sum(isinstance(e, h2.events.DataReceived) for e in client.events)

    before = messages()
    client.read_until(lambda _event: messages() > before + 10)  # still streaming after the GOAWAY
    assert not methods.stream_ended.is_set()
    client.close()
    assert methods.stream_ended.wait(WAIT)


def test_goaway_with_an_error_from_the_client_cuts_its_calls(
    server: RpcServer, raw_client: ClientFactory, methods: Methods
) -> None:
    client = streaming(raw_client, b"100")
    client.read_until(lambda e: isinstance(e, h2.events.DataReceived))
    client.sock.sendall(goaway_frame(0, h2.errors.ErrorCodes.PROTOCOL_ERROR))
    assert methods.stream_ended.wait(WAIT)
    assert serves(server)


def test_a_client_that_never_reads_costs_bounded_memory_until_it_goes(
    server: RpcServer, raw_client: ClientFactory, methods: Methods
) -> None:
    client = streaming(raw_client, b"65536")
    assert methods.entered.wait(WAIT)
    wait_until(
        lambda: backlog(server) >= server_module.STREAM_BACKLOG_BYTES, what="the producer filled its backlog"
    )
    assert backlog(server) <= server_module.STREAM_BACKLOG_BYTES + 65536 + 5
    assert not methods.stream_ended.is_set()
    client.close()
    assert methods.stream_ended.wait(WAIT), "the stream's thread was not freed when the client went"
    assert serves(server)


def test_cancel_frees_a_stream_blocked_on_a_client_that_never_reads(
    server: RpcServer, raw_client: ClientFactory, methods: Methods
) -> None:
    client = streaming(raw_client, b"65536")
    assert methods.entered.wait(WAIT)
    wait_until(lambda: backlog(server) >= server_module.STREAM_BACKLOG_BYTES, what="the producer is held")
    methods.contexts[0].cancel()
    assert methods.stream_ended.wait(WAIT)
    assert client.status(1)[b"grpc-status"] == b"1"  # after the backlog, which the client now reads


@pytest.mark.parametrize("size", [b"100", b"65536"], ids=["small-messages", "large-messages"])
def test_a_reset_from_a_client_that_stopped_reading_is_still_read(
    server: RpcServer, raw_client: ClientFactory, methods: Methods, size: bytes
) -> None:
    """Small messages fill the socket before the window: a send must not block the reader then."""
    client = streaming(raw_client, size)
    stream_id = 1  # the stream streaming() opened
    wait_until(lambda: held_back(server), what="the stream is held back")
    client.conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
    client.flush()
    assert methods.stream_ended.wait(WAIT)


@pytest.mark.parametrize("size", [b"100", b"65536"], ids=["small-messages", "large-messages"])
def test_cancel_frees_a_stream_at_once_whatever_holds_it_back(
    server: RpcServer, raw_client: ClientFactory, methods: Methods, size: bytes
) -> None:
    streaming(raw_client, size)
    assert methods.entered.wait(WAIT)
    wait_until(lambda: held_back(server), what="the stream is held back")
    started = time.monotonic()
    methods.contexts[0].cancel()
    assert methods.stream_ended.wait(WAIT)
    assert time.monotonic() - started < 0.5, "the producer slept through its cancel"


def test_a_client_that_takes_nothing_is_dropped_after_the_send_timeout(
    server: RpcServer, raw_client: ClientFactory, methods: Methods, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "SEND_TIMEOUT_S", 0.3)
    streaming(raw_client, b"100")
    assert methods.stream_ended.wait(WAIT)
    assert serves(server)


def test_stop_with_grace_is_not_held_up_by_a_client_that_stopped_reading(
    server: RpcServer, raw_client: ClientFactory, methods: Methods
) -> None:
    streaming(raw_client, b"100")
    wait_until(lambda: held_back(server), what="the stream is held back")
    started = time.monotonic()
    assert server.stop(0.2).wait(WAIT)
    assert time.monotonic() - started < 2.0
    assert methods.stream_ended.wait(WAIT)


def test_after_our_goaway_new_streams_are_refused_and_earlier_ones_answered(
    server: RpcServer, raw_client: ClientFactory
) -> None:
    client = raw_client()
    client.handshake()
    first = client.request("/t.T/Echo", b"before")
    assert client.status(first)[b"grpc-status"] == b"0"
    held = client.request("/t.T/Echo", None, end=False)  # opened before the GOAWAY, finished after
    wait_until(lambda: all(c._h2.highest_inbound_stream_id == held for c in list(server._connections)))
    (connection,) = server._connections
    connection.goaway()
    late = client.request("/t.T/Echo", b"after")  # our h2 has not read the GOAWAY, so it sends
    client.conn.send_data(held, frame(b"late half"), end_stream=True)
    client.flush()
    splitter = FrameSplitter()
    frames: list[bytes] = []
    client.sock.settimeout(WAIT)

    def seen(frame_type: int, stream_id: int) -> list[bytes]:
        return [f for f in frames if f[3] == frame_type and int.from_bytes(f[5:9], "big") == stream_id]

    while not (seen(0x3, late) and seen(0x1, held) and len(seen(0x1, held)) == 2):
        frames.extend(splitter.feed(client.sock.recv(65536)))
    goaway = next(goaway_of(f) for f in frames if goaway_of(f) is not None)
    assert goaway == GoAway(last_stream_id=held, error_code=0)
    (rst,) = seen(0x3, late)
    assert int.from_bytes(rst[9:13], "big") == h2.errors.ErrorCodes.REFUSED_STREAM
    assert b"late half" in b"".join(seen(0x0, held))


def test_a_client_that_pings_but_never_reads_is_dropped(
    server: RpcServer, raw_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every PING queues an ACK; a client that keeps sending cannot keep the send timeout away."""
    monkeypatch.setattr(server_module, "SEND_TIMEOUT_S", 0.3)
    client = raw_client()
    client.handshake()
    pings = hyperframe.frame.PingFrame(0, b"12345678").serialize() * 4096  # sent as fast as the socket takes
    deadline = time.monotonic() + WAIT
    with pytest.raises((BrokenPipeError, ConnectionResetError)):  # not TimeoutError: the server is gone
        while time.monotonic() < deadline:
            client.sock.sendall(pings)
        raise AssertionError("still connected")
    assert serves(server)


def test_a_call_to_an_unknown_method_is_refused_before_its_request_ends(raw_client: ClientFactory) -> None:
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Missing", None, end=False)
    assert client.status(stream_id)[b"grpc-status"] == b"12"
    reset = client.read_until(lambda e: isinstance(e, h2.events.StreamReset) and e.stream_id == stream_id)
    assert isinstance(reset, h2.events.StreamReset)
    assert reset.error_code == h2.errors.ErrorCodes.NO_ERROR


def test_a_stream_h2_closes_under_a_pending_answer_costs_only_that_stream(raw_client: ClientFactory) -> None:
    """DATA after END_STREAM makes h2 reset the stream itself, before the answer is sent."""
    client = raw_client()
    client.handshake()
    stream_id = client.request("/t.T/Echo", None, end=False)
    client.conn.send_data(stream_id, frame(b"first"), end_stream=True)
    stray = hyperframe.frame.DataFrame(stream_id, frame(b"stray"))
    client.sock.sendall(client.conn.data_to_send() + stray.serialize())  # one read: h2 resets first
    client.read_until(lambda e: isinstance(e, h2.events.StreamReset | h2.events.StreamEnded))
    again = client.request("/t.T/Echo", b"again")
    assert client.status(again)[b"grpc-status"] == b"0"
