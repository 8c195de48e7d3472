"""Our client against grpcio's server (the reference) and against scripted HTTP/2 servers for the
answers grpcio never gives: resets, bare HTTP errors, GOAWAYs and peers that hang up mid-answer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import pytest

from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr
from hcs_deviceplugin.kubelet.podresources import list_allocations
from hcs_deviceplugin.rpc.client import CallHandle, unary_call
from hcs_deviceplugin.rpc.server import RpcServer
from hcs_deviceplugin.rpc.status import Code, RpcError
from hcs_deviceplugin.rpc.wire import MAX_MESSAGE_BYTES, frame
from tests.rpc.conftest import WAIT, Methods, begin_graceful_stop


class Reference:
    """A grpcio server of ``/t.T/Echo``, ``/t.T/Abort`` and ``/t.T/Hold``, recording what it saw."""

    def __init__(self, path: Path) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.metadata: dict[str, str] = {}
        self.time_remaining: float | None = None
        self.cancelled = threading.Event()
        handlers = {
            "Echo": grpc.unary_unary_rpc_method_handler(self.echo),
            "Abort": grpc.unary_unary_rpc_method_handler(self.abort),
            "Hold": grpc.unary_unary_rpc_method_handler(self.hold),
        }
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", handlers),))
        self.server.add_insecure_port(f"unix:{path}")
        self.server.start()

    def echo(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.metadata = {k: str(v) for k, v in context.invocation_metadata()}
        self.time_remaining = context.time_remaining()
        return request * 1024 if request.startswith(b"big") else request

    def abort(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        code, _, details = request.decode().partition(":")
        context.abort(next(s for s in grpc.StatusCode if s.value[0] == int(code)), details)

    def hold(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        context.add_callback(self.cancelled.set)
        self.entered.set()
        self.release.wait(WAIT)
        return request


@pytest.fixture
def reference(sock_dir: Path) -> Iterator[Reference]:
    served = Reference(sock_dir / "ref.sock")
    try:
        yield served
    finally:
        served.release.set()
        served.server.stop(None).wait(WAIT)


def call(
    path: Path, method: str, request: bytes, timeout: float = WAIT, handle: CallHandle | None = None
) -> bytes:
    return unary_call(path, method, request, timeout, handle)


def test_echo_of_a_request_and_an_answer_larger_than_the_window(reference: Reference, sock_dir: Path) -> None:
    request = b"big" + bytes(range(256))  # 259 bytes in, 259 KiB back
    assert call(sock_dir / "ref.sock", "/t.T/Echo", request) == request * 1024


def test_a_request_larger_than_the_window(reference: Reference, sock_dir: Path) -> None:
    request = bytes(range(256)) * 2048  # 512 KiB
    assert call(sock_dir / "ref.sock", "/t.T/Echo", request) == request


def test_headers_a_go_or_grpcio_server_expects(reference: Reference, sock_dir: Path) -> None:
    call(sock_dir / "ref.sock", "/t.T/Echo", b"x", timeout=7.0)
    assert reference.metadata["user-agent"].startswith("hcs-deviceplugin-rpc/")
    assert reference.time_remaining is not None
    assert 5.0 < reference.time_remaining <= 7.0  # grpc-timeout reached the server as a deadline


@pytest.mark.parametrize(
    ("code", "details"),
    [
        pytest.param(Code.NOT_FOUND, "no pod 日本 100%", id="unicode"),
        pytest.param(Code.FAILED_PRECONDITION, "", id="no-details"),
        pytest.param(Code.UNAVAILABLE, "line\nbreak", id="control"),
    ],
)
def test_statuses_from_grpcio(reference: Reference, sock_dir: Path, code: Code, details: str) -> None:
    with pytest.raises(RpcError) as caught:
        call(sock_dir / "ref.sock", "/t.T/Abort", f"{int(code)}:{details}".encode())
    assert (caught.value.code, caught.value.details) == (code, details)


def test_unknown_method_on_grpcio_is_unimplemented(reference: Reference, sock_dir: Path) -> None:
    with pytest.raises(RpcError) as caught:
        call(sock_dir / "ref.sock", "/t.T/Nope", b"")
    assert caught.value.code is Code.UNIMPLEMENTED


def test_deadline_exceeded_and_the_server_sees_it(reference: Reference, sock_dir: Path) -> None:
    started = time.monotonic()
    with pytest.raises(RpcError) as caught:
        call(sock_dir / "ref.sock", "/t.T/Hold", b"", timeout=0.3)
    assert caught.value.code is Code.DEADLINE_EXCEEDED
    assert time.monotonic() - started < WAIT / 2
    assert reference.cancelled.wait(WAIT), "the server never learnt the call was over"


def test_cancel_from_another_thread_ends_the_call_at_once(reference: Reference, sock_dir: Path) -> None:
    handle = CallHandle()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call(sock_dir / "ref.sock", "/t.T/Hold", b"", handle=handle)
        except RpcError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=run)
    caller.start()
    assert reference.entered.wait(WAIT)
    handle.cancel()
    caller.join(WAIT)
    assert not caller.is_alive()
    assert isinstance(outcome[0], RpcError)
    assert outcome[0].code is Code.CANCELLED
    assert reference.cancelled.wait(WAIT)


def test_a_call_cancelled_before_it_starts_never_dials(sock_dir: Path) -> None:
    handle = CallHandle()
    handle.cancel()
    with pytest.raises(RpcError) as caught:
        call(sock_dir / "nobody.sock", "/t.T/Echo", b"", handle=handle)
    assert caught.value.code is Code.CANCELLED


def test_nothing_listening_is_unavailable(sock_dir: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_dir / "dead.sock"))
    listener.close()  # the file stays, nobody accepts
    for path in (sock_dir / "dead.sock", sock_dir / "missing.sock"):
        with pytest.raises(RpcError) as caught:
            call(path, "/t.T/Echo", b"")
        assert caught.value.code is Code.UNAVAILABLE


def test_our_client_gets_its_answer_through_our_servers_graceful_stop(
    server: RpcServer, methods: Methods
) -> None:
    outcome: list[bytes | RpcError] = []

    def run() -> None:
        try:
            outcome.append(call(server.path, "/t.T/Hold", b"held"))
        except RpcError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=run)
    caller.start()
    assert methods.entered.wait(WAIT)
    stopper = begin_graceful_stop(server)
    methods.release.set()
    caller.join(WAIT)
    stopper.join(WAIT)
    assert outcome == [b"held"]


def test_pod_resources_list_of_many_pods(sock_dir: Path) -> None:
    """A real-sized List answer (well over the 64 KiB initial window) through the caller kubelet serves."""
    answer = pr.ListPodResourcesResponse(
        pod_resources=[
            pr.PodResources(
                name=f"pod-{i}",
                namespace="ml",
                containers=[
                    pr.ContainerResources(
                        name="main",
                        devices=[
                            pr.ContainerDevices(resource_name="hcs.example.com/a", device_ids=[f"GPU-{i}"])
                        ],
                    )
                ],
            )
            for i in range(5000)
        ]
    )
    assert answer.ByteSize() > 256 * 1024

    def list_pods(request: bytes, context: grpc.ServicerContext) -> bytes:
        return answer.SerializeToString()

    kubelet = grpc.server(ThreadPoolExecutor(max_workers=2))
    handlers = {"List": grpc.unary_unary_rpc_method_handler(list_pods)}
    kubelet.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("v1.PodResourcesLister", handlers),)
    )
    kubelet.add_insecure_port(f"unix:{sock_dir / 'pr.sock'}")
    kubelet.start()
    try:
        allocations = list_allocations(sock_dir / "pr.sock")
    finally:
        kubelet.stop(None).wait(WAIT)
    assert len(allocations) == 5000
    assert {a.device for a in allocations} == {f"GPU-{i}" for i in range(5000)}


Script = Callable[[h2.connection.H2Connection, int, socket.socket], None]
"""What a scripted server does once a request is complete: queue frames (sent after it returns),
or write bytes / close the socket itself."""


class ScriptedServer:
    """An HTTP/2 server on a bare socket that answers each request by a script."""

    def __init__(self, path: Path, script: Script) -> None:
        self.script = script
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        sock, _ = self.listener.accept()
        sock.settimeout(WAIT)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        conn.initiate_connection()
        with sock:
            try:
                sock.sendall(conn.data_to_send())
                while data := sock.recv(65536):
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.DataReceived):
                            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        if isinstance(event, h2.events.StreamEnded):
                            self.script(conn, event.stream_id, sock)
                    sock.sendall(conn.data_to_send())
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        self.thread.join(WAIT)


@pytest.fixture
def scripted(sock_dir: Path) -> Iterator[Callable[[Script], Path]]:
    made: list[ScriptedServer] = []

    def make(script: Script) -> Path:
        path = sock_dir / f"s{len(made)}.sock"
        made.append(ScriptedServer(path, script))
        return path

    yield make
    for server in made:
        server.close()


OK_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]


def answer(message: bytes, *trailers: tuple[bytes, bytes]) -> Script:
    def script(conn: h2.connection.H2Connection, stream_id: int, sock: socket.socket) -> None:
        conn.send_headers(stream_id, OK_HEADERS)
        conn.send_data(stream_id, frame(message))
        conn.send_headers(stream_id, [(b"grpc-status", b"0"), *trailers], end_stream=True)

    return script


@pytest.mark.parametrize(
    ("error_code", "code"),
    [
        pytest.param(h2.errors.ErrorCodes.CANCEL, Code.CANCELLED, id="cancel"),
        pytest.param(h2.errors.ErrorCodes.REFUSED_STREAM, Code.UNAVAILABLE, id="refused"),
        pytest.param(h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, Code.RESOURCE_EXHAUSTED, id="calm"),
        pytest.param(h2.errors.ErrorCodes.INADEQUATE_SECURITY, Code.PERMISSION_DENIED, id="security"),
        pytest.param(h2.errors.ErrorCodes.PROTOCOL_ERROR, Code.INTERNAL, id="protocol"),
        pytest.param(h2.errors.ErrorCodes.NO_ERROR, Code.INTERNAL, id="no-error-before-the-answer"),
    ],
)
def test_a_reset_stream_maps_to_the_specs_status(
    scripted: Callable[[Script], Path], error_code: h2.errors.ErrorCodes, code: Code
) -> None:
    path = scripted(lambda conn, stream_id, sock: conn.reset_stream(stream_id, error_code))
    with pytest.raises(RpcError) as caught:
        call(path, "/t.T/Echo", b"")
    assert caught.value.code is code


@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param(b"400", Code.INTERNAL, id="400"),
        pytest.param(b"401", Code.UNAUTHENTICATED, id="401"),
        pytest.param(b"403", Code.PERMISSION_DENIED, id="403"),
        pytest.param(b"404", Code.UNIMPLEMENTED, id="404"),
        pytest.param(b"429", Code.UNAVAILABLE, id="429"),
        pytest.param(b"503", Code.UNAVAILABLE, id="503"),
        pytest.param(b"500", Code.UNKNOWN, id="500"),
    ],
)
def test_an_http_error_without_grpc_status_maps_to_the_specs_status(
    scripted: Callable[[Script], Path], status: bytes, code: Code
) -> None:
    path = scripted(
        lambda conn, stream_id, sock: conn.send_headers(stream_id, [(b":status", status)], end_stream=True)
    )
    with pytest.raises(RpcError) as caught:
        call(path, "/t.T/Echo", b"")
    assert caught.value.code is code


def test_grpc_status_wins_over_the_http_status(scripted: Callable[[Script], Path]) -> None:
    headers = [(b":status", b"415"), (b"content-type", b"application/grpc"), (b"grpc-status", b"13")]
    path = scripted(lambda conn, stream_id, sock: conn.send_headers(stream_id, headers, end_stream=True))
    with pytest.raises(RpcError) as caught:
        call(path, "/t.T/Echo", b"")
    assert caught.value.code is Code.INTERNAL


def test_a_reset_after_the_answer_changes_nothing(scripted: Callable[[Script], Path]) -> None:
    def script(conn: h2.connection.H2Connection, stream_id: int, sock: socket.socket) -> None:
        answer(b"done")(conn, stream_id, sock)
        sock.sendall(conn.data_to_send())
        raw_rst = (4).to_bytes(3, "big") + b"\x03\x00" + stream_id.to_bytes(4, "big") + b"\x00\x00\x00\x00"
        sock.sendall(raw_rst)  # h2 refuses to reset a stream it closed; a peer may still do it

    assert call(scripted(script), "/t.T/Echo", b"") == b"done"


def test_a_graceful_goaway_before_the_answer_lets_it_through(scripted: Callable[[Script], Path]) -> None:
    """grpc-go's GracefulStop: GOAWAY(2^31-1), then GOAWAY(last id), then the answers still owed."""

    def script(conn: h2.connection.H2Connection, stream_id: int, sock: socket.socket) -> None:
        sock.sendall(conn.data_to_send())
        for last in (2**31 - 1, stream_id):
            sock.sendall(
                (8).to_bytes(3, "big") + b"\x07\x00\x00\x00\x00\x00" + last.to_bytes(4, "big") + b"\0" * 4
            )
        answer(b"after goaway")(conn, stream_id, sock)

    assert call(scripted(script), "/t.T/Echo", b"") == b"after goaway"


@pytest.mark.parametrize(
    ("last", "error"),
    [pytest.param(0, 0, id="not-our-stream"), pytest.param(1, 2, id="an-error")],
)
def test_any_other_goaway_is_unavailable(scripted: Callable[[Script], Path], last: int, error: int) -> None:
    def script(conn: h2.connection.H2Connection, stream_id: int, sock: socket.socket) -> None:
        sock.sendall(conn.data_to_send())
        sock.sendall(
            (8).to_bytes(3, "big")
            + b"\x07\x00\x00\x00\x00\x00"
            + last.to_bytes(4, "big")
            + error.to_bytes(4, "big")
        )

    with pytest.raises(RpcError) as caught:
        call(scripted(script), "/t.T/Echo", b"")
    assert caught.value.code is Code.UNAVAILABLE


def test_a_peer_that_hangs_up_mid_answer_is_unavailable(scripted: Callable[[Script], Path]) -> None:
    def script(conn: h2.connection.H2Connection, stream_id: int, sock: socket.socket) -> None:
        conn.send_headers(stream_id, OK_HEADERS)
        conn.send_data(stream_id, frame(b"x" * 1000)[:500])
        sock.sendall(conn.data_to_send())
        sock.shutdown(socket.SHUT_RDWR)

    with pytest.raises(RpcError) as caught:
        call(scripted(script), "/t.T/Echo", b"")
    assert caught.value.code is Code.UNAVAILABLE


@pytest.mark.parametrize(
    ("body", "trailers", "code"),
    [
        pytest.param(
            b"\x00" + (MAX_MESSAGE_BYTES + 1).to_bytes(4, "big"),
            [],
            Code.RESOURCE_EXHAUSTED,
            id="over-the-limit",
        ),
        pytest.param(b"\x01\x00\x00\x00\x01a", [], Code.INTERNAL, id="compressed"),
        pytest.param(frame(b"a") + frame(b"b"), [(b"grpc-status", b"0")], Code.INTERNAL, id="two-answers"),
        pytest.param(b"", [(b"grpc-status", b"0")], Code.INTERNAL, id="no-answer"),
        pytest.param(frame(b"abc")[:4], [(b"grpc-status", b"0")], Code.INTERNAL, id="cut-answer"),
        pytest.param(frame(b"a"), [], Code.INTERNAL, id="no-status"),
        pytest.param(frame(b"a"), [(b"grpc-status", b"77")], Code.UNKNOWN, id="unknown-status"),
    ],
)
def test_malformed_answers(
    scripted: Callable[[Script], Path], body: bytes, trailers: list[tuple[bytes, bytes]], code: Code
) -> None:
    def script(conn: h2.connection.H2Connection, stream_id: int, sock: socket.socket) -> None:
        conn.send_headers(stream_id, OK_HEADERS)
        if body:
            conn.send_data(stream_id, body)
        conn.send_headers(stream_id, trailers or [(b"x-nothing", b"1")], end_stream=True)

    with pytest.raises(RpcError) as caught:
        call(scripted(script), "/t.T/Echo", b"")
    assert caught.value.code is code


def test_a_request_waiting_for_window_goes_on_when_settings_raise_it(sock_dir: Path) -> None:
    """grpc-go's BDP estimate grows stream windows by a higher SETTINGS_INITIAL_WINDOW_SIZE, with
    no stream WINDOW_UPDATE: a request stalled on its stream's window must resume on the SETTINGS
    alone (here the connection's window is large from the start, as grpc-go's server makes it)."""
    path = sock_dir / "bdp.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    request = bytes(range(256)) * 512  # 128 KiB: twice the default stream window

    def serve() -> None:
        sock, _ = listener.accept()
        sock.settimeout(WAIT)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        conn.initiate_connection()
        conn.increment_flow_control_window(1 << 20)
        received = 0
        raised = False
        with sock:
            sock.sendall(conn.data_to_send())
            while data := sock.recv(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        received += event.flow_controlled_length  # never acknowledged per stream
                    if isinstance(event, h2.events.StreamEnded):
                        conn.send_headers(event.stream_id, OK_HEADERS)
                        conn.send_data(event.stream_id, frame(str(received).encode()))
                        conn.send_headers(event.stream_id, [(b"grpc-status", b"0")], end_stream=True)
                if received >= 65_535 and not raised:
                    raised = True
                    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
                sock.sendall(conn.data_to_send())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert call(path, "/t.T/Echo", request, timeout=5.0) == str(len(frame(request))).encode()
    finally:
        listener.close()
        thread.join(WAIT)
