"""Unary gRPC calls to a unix socket, one fresh connection per call, cancellable from another thread.

The daemon's calls to kubelet are rare (Register, pod-resources List, our own readiness probe), so a
connection per call costs nothing that matters and has a property the daemon relies on: a socket
path that a restarted kubelet re-created is always dialled anew, never reached over a connection to
the process it replaced.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from hcs_deviceplugin.rpc.status import Code, RpcError
from hcs_deviceplugin.rpc.wire import (
    CONTENT_TYPE,
    MAX_MESSAGE_BYTES,
    MessageReader,
    frame,
    status_of,
    timeout_header,
)

READ_CHUNK = 65536


class CallHandle:
    """Lets another thread cancel a call in flight (it then raises CANCELLED)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def _attach(self, sock: socket.socket | None) -> bool:
        """Track ``sock`` (None: the call is over); False if cancel() came first."""
        with self._lock:
            self._sock = sock
            return not self._cancelled


def unary_call(
    path: Path, method: str, request: bytes, timeout: float, handle: CallHandle | None = None
) -> bytes:
    """Call ``method`` (``/package.Service/Method``) on the socket ``path``; the response's bytes.

    Raises :class:`RpcError`: the peer's status, UNAVAILABLE if nothing answers or the connection
    breaks, DEADLINE_EXCEEDED after ``timeout`` seconds, CANCELLED if ``handle`` was cancelled.
    """
    handle = handle or CallHandle()
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not handle._attach(sock):
            raise RpcError(Code.CANCELLED, f"{method} cancelled")
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.connect(os.fspath(path))
            return _exchange(sock, method, request, deadline, timeout)
        except TimeoutError as exc:
            raise RpcError(Code.DEADLINE_EXCEEDED, f"{method}: no answer within {timeout:g} s") from exc
        except (OSError, h2.exceptions.ProtocolError) as exc:
            if handle.cancelled:
                raise RpcError(Code.CANCELLED, f"{method} cancelled") from exc
            raise RpcError(Code.UNAVAILABLE, f"{method} on {path}: {exc}") from exc
        except RpcError:
            if handle.cancelled:
                raise RpcError(Code.CANCELLED, f"{method} cancelled") from None
            raise
    finally:
        handle._attach(None)
        sock.close()


def _exchange(sock: socket.socket, method: str, request: bytes, deadline: float, timeout: float) -> bytes:
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    conn.initiate_connection()
    stream_id = conn.get_next_available_stream_id()
    conn.send_headers(
        stream_id,
        [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", method.encode("ascii")),
            (b":authority", b"localhost"),
            (b"content-type", CONTENT_TYPE),
            (b"te", b"trailers"),
            (b"grpc-timeout", timeout_header(timeout)),
        ],
    )
    pending = frame(request)
    pending = _send_what_fits(conn, stream_id, pending)
    sock.sendall(conn.data_to_send())
    reader = MessageReader(MAX_MESSAGE_BYTES)
    messages: list[bytes] = []
    headers: dict[bytes, bytes] = {}
    trailers: dict[bytes, bytes] = {}
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = sock.recv(READ_CHUNK)
        if not data:
            raise OSError("connection closed before the call ended")
        ended = False
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id:
                headers = dict(event.headers or ())
            elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream_id:
                conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
                messages.extend(reader.feed(event.data or b""))
            elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == stream_id:
                trailers = dict(event.headers or ())
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id:
                ended = True
            elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream_id:
                raise RpcError(
                    Code.CANCELLED if event.error_code == 8 else Code.INTERNAL, f"{method}: stream reset"
                )
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise OSError(f"peer closed the connection (GOAWAY {event.error_code})")
            elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged) and pending:
                pending = _send_what_fits(conn, stream_id, pending)
        outgoing = conn.data_to_send()
        if outgoing:
            sock.sendall(outgoing)
        if ended:
            break
    if headers.get(b":status", b"200") != b"200":
        raise RpcError(Code.UNAVAILABLE, f"{method}: HTTP status {headers.get(b':status', b'?').decode()}")
    status = status_of(trailers) or status_of(headers)
    if status is None:
        raise RpcError(Code.INTERNAL, f"{method}: the answer carried no grpc-status")
    code, details = status
    if code is not Code.OK:
        raise RpcError(code, details)
    if len(messages) != 1 or reader.partial:
        raise RpcError(Code.INTERNAL, f"{method}: expected one response message, got {len(messages)}")
    return messages[0]


def _send_what_fits(conn: h2.connection.H2Connection, stream_id: int, pending: bytes) -> bytes:
    """Send as much of the request as the window allows, ending the stream with the last byte."""
    while pending:
        window = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size)
        if window <= 0:
            return pending
        chunk, pending = pending[:window], pending[window:]
        conn.send_data(stream_id, chunk, end_stream=not pending)
    return pending
