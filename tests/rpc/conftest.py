"""Fixtures for the transport: our server with a few test methods, grpcio channels to it, and a raw
HTTP/2 client (``h2`` on a plain socket) for what no well-behaved gRPC client would send.

Everything is a real unix socket in a short temp dir (unix paths are limited to 107 bytes).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import pytest

from hcs_deviceplugin.rpc.calls import CallContext, Method, ServerStream, Unary
from hcs_deviceplugin.rpc.server import RpcServer
from hcs_deviceplugin.rpc.status import Code
from hcs_deviceplugin.rpc.wire import frame
from tests.waiting import wait_until

WAIT = 10.0
"""Bound on every wait; a passing test never comes near it."""


class Raw(bytes):
    """A response that is its own serialization (the transport never looks inside messages)."""

    def SerializeToString(self) -> bytes:
        return bytes(self)


class Methods:
    """The test service ``/t.T/...``: what each method saw, and events to hold a call open."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.stream_ended = threading.Event()
        self.contexts: list[CallContext] = []

    def table(self) -> dict[str, Method]:
        return {
            "/t.T/Echo": Unary(bytes, self.echo),
            "/t.T/Fail": Unary(bytes, self.fail),
            "/t.T/Abort": Unary(bytes, self.abort),
            "/t.T/Hold": Unary(bytes, self.hold),
            "/t.T/Stream": ServerStream(bytes, self.stream),
            "/t.T/Forever": ServerStream(bytes, self.forever),
            "/t.T/Last": ServerStream(bytes, self.last),
            "/t.T/Closing": ServerStream(bytes, self.closing),
        }

    def echo(self, request: bytes, context: CallContext) -> Raw:
        return Raw(request)

    def fail(self, request: bytes, context: CallContext) -> Raw:
        raise ValueError(request.decode("utf-8", "surrogateescape"))

    def abort(self, request: bytes, context: CallContext) -> Raw:
        code, _, details = request.decode("utf-8").partition(":")
        context.abort(Code(int(code)), details)

    def hold(self, request: bytes, context: CallContext) -> Raw:
        self.entered.set()
        self.release.wait(WAIT)
        return Raw(request)

    def stream(self, request: bytes, context: CallContext) -> Iterator[Raw]:
        """``count:size``: that many messages of that many bytes (each byte its index mod 256)."""
        count, _, size = request.decode().partition(":")
        for i in range(int(count)):
            yield Raw(bytes([i % 256]) * int(size))

    def last(self, request: bytes, context: CallContext) -> Iterator[Raw]:
        """One message, then the server cancels the call (as a pool's drain ends ListAndWatch)."""
        yield Raw(request)
        context.cancel()
        yield Raw(b"never sent")

    def closing(self, request: bytes, context: CallContext) -> Iterator[Raw]:
        """``first``, then (once released) ``last`` and a clean end: a stream its owner ends."""
        yield Raw(b"first")
        self.release.wait(WAIT)
        yield Raw(b"last")

    def forever(self, request: bytes, context: CallContext) -> Iterator[Raw]:
        """Messages of ``request``'s size as fast as the transport takes them, until cancelled."""
        self.contexts.append(context)
        self.entered.set()
        try:
            while context.is_active():
                yield Raw(b"x" * int(request.decode()))
        finally:
            self.stream_ended.set()


def begin_graceful_stop(server: RpcServer) -> threading.Thread:
    """Start ``server.stop(WAIT)`` on a thread; return it once every connection has our GOAWAY."""
    stopper = threading.Thread(target=server.stop, args=(WAIT,))
    stopper.start()
    wait_until(
        lambda: all(c._last_stream_id is not None for c in list(server._connections)),
        what="the GOAWAY went out",
    )
    return stopper


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rpc", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def methods() -> Methods:
    return Methods()


@pytest.fixture
def server(sock_dir: Path, methods: Methods) -> Iterator[RpcServer]:
    served = RpcServer(sock_dir / "t.sock", methods.table(), name="t")
    served.start()
    try:
        yield served
    finally:
        methods.release.set()
        assert served.stop(None).wait(WAIT), "connections still open after stop"


@pytest.fixture
def channel(server: RpcServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"unix:{server.path}") as chan:
        yield chan


def unary(chan: grpc.Channel, method: str) -> Any:
    """A grpcio unary callable on raw bytes."""
    return chan.unary_unary(method, request_serializer=None, response_deserializer=None)


class RawClient:
    """An HTTP/2 client on a bare socket, driven by hand: sends what it is told, collects events."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT)
        self.sock.connect(str(path))
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.events: list[h2.events.Event] = []
        self.closed = False

    def handshake(self) -> None:
        self.conn.initiate_connection()
        self.flush()

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def request(
        self, method: str, body: bytes | None = None, end: bool = True, extra: dict[str, str] | None = None
    ) -> int:
        """Open a stream with gRPC request headers (``extra`` overrides them) and maybe a framed body."""
        stream_id = self.conn.get_next_available_stream_id()
        headers = {
            ":method": "POST",
            ":scheme": "http",
            ":path": method,
            ":authority": "localhost",
            "content-type": "application/grpc",
            "te": "trailers",
        }
        headers.update(extra or {})
        fields = [(k.encode(), v.encode()) for k, v in headers.items()]
        self.conn.send_headers(stream_id, fields, end_stream=body is None and end)
        if body is not None:
            self.conn.send_data(stream_id, frame(body), end_stream=end)
        self.flush()
        return stream_id

    def read_until(
        self, predicate: Callable[[h2.events.Event], bool], timeout: float = WAIT
    ) -> h2.events.Event:
        """Read and answer (h2 acknowledges data) until an event matches; that event."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            data = self.sock.recv(65536)
            if not data:
                self.closed = True
                raise ConnectionError("server closed the connection")
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                self.events.append(event)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the server may be gone
                self.flush()

    def headers(self, stream_id: int) -> dict[bytes, bytes]:
        """The response headers of ``stream_id`` (all of a trailers-only answer)."""

        def answers(event: h2.events.Event) -> bool:
            return isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id

        event = self.read_until(answers)
        assert isinstance(event, h2.events.ResponseReceived)
        return dict(event.headers or ())

    def status(self, stream_id: int) -> dict[bytes, bytes]:
        """The header block that ends ``stream_id`` (trailers, or the headers of a trailers-only answer)."""

        def ends(event: h2.events.Event) -> bool:
            return (
                isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived)
                and event.stream_id == stream_id
                and event.stream_ended is not None
            )

        event = self.read_until(ends)
        assert isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived)
        return dict(event.headers or ())

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_client(server: RpcServer) -> Iterator[Callable[[], RawClient]]:
    made: list[RawClient] = []

    def make() -> RawClient:
        client = RawClient(server.path)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@dataclass(frozen=True)
class GoAway:
    """A GOAWAY frame's content, as a test reads it off the wire."""

    last_stream_id: int
    error_code: int


def goaway_of(frame_bytes: bytes) -> GoAway | None:
    """The GOAWAY ``frame_bytes`` (a whole frame) is, or None for any other frame."""
    if len(frame_bytes) < 17 or frame_bytes[3] != 0x7:
        return None
    body = frame_bytes[9:]
    return GoAway(int.from_bytes(body[:4], "big") & 0x7FFF_FFFF, int.from_bytes(body[4:8], "big"))


class FrameSplitter:
    """Whole frames out of bytes as a server sends them (no preface)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames: list[bytes] = []
        while len(self._buffer) >= 9:
            end = 9 + int.from_bytes(self._buffer[:3], "big")
            if len(self._buffer) < end:
                break
            frames.append(bytes(self._buffer[:end]))
            del self._buffer[:end]
        return frames
