"""Unary gRPC calls to a unix socket, one fresh connection per call, cancellable from another thread.

The daemon's calls to kubelet are rare (Register, pod-resources List, our own readiness probe), so a
connection per call costs nothing that matters and has a property the daemon relies on: a socket
path that a restarted kubelet re-created is always dialled anew, never reached over a connection to
the process it replaced.

What a Go gRPC server (kubelet) does that grpcio's does not, and how it is met here: a graceful stop
sends GOAWAY (first with the largest stream id, then the real one) and still finishes the calls
it names, so a GOAWAY that covers our stream and says NO_ERROR changes nothing, while any other
means the answer is not coming. It may also send PINGs (for its flow-control estimate) and
WINDOW_UPDATEs at any time; the PINGs are answered after each read.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

from hcs_deviceplugin.rpc.frames import ErrorCode, encode_fields, error_name
from hcs_deviceplugin.rpc.http2 import (
    Connection,
    ConnectionFailed,
    DataReceived,
    GoAwayReceived,
    HeadersReceived,
    StreamReset,
    WindowOpened,
)
from hcs_deviceplugin.rpc.status import Code, RpcError
from hcs_deviceplugin.rpc.wire import (
    CONTENT_TYPE,
    MAX_MESSAGE_BYTES,
    CompressedMessage,
    MessageReader,
    MessageTooLarge,
    code_of_http_status,
    code_of_reset,
    frame,
    status_of,
    timeout_header,
)

READ_CHUNK = 65536
USER_AGENT = b"hcs-deviceplugin-rpc/1"


class CallHandle:
    """Lets another thread cancel a call in flight (it then raises CANCELLED)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._cancelled = False

    def cancel(self) -> None:
        """End the call: it raises CANCELLED. Never blocks (a shutdown returns at once).

        The shutdown happens under the lock so the call cannot close its socket meanwhile: a
        closed descriptor's number may already belong to another socket by then.
        """
        with self._lock:
            self._cancelled = True
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)

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
            if handle.cancelled:  # cancelled while connecting, when a shutdown has no effect
                raise RpcError(Code.CANCELLED, f"{method} cancelled")
            return _exchange(sock, method, request, deadline)
        except TimeoutError as exc:
            raise RpcError(Code.DEADLINE_EXCEEDED, f"{method}: no answer within {timeout:g} s") from exc
        except (OSError, ConnectionFailed) as exc:
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


def _exchange(sock: socket.socket, method: str, request: bytes, deadline: float) -> bytes:
    conn = Connection(client_side=True)
    conn.start()
    stream_id = conn.open_stream()
    fields = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", method.encode("ascii")),
        (b":authority", b"localhost"),
        (b"content-type", CONTENT_TYPE),
        (b"te", b"trailers"),
        (b"grpc-timeout", timeout_header(deadline - time.monotonic())),
        (b"user-agent", USER_AGENT),
    ]
    conn.send_header_block(stream_id, encode_fields(fields))
    pending = _send_what_fits(conn, stream_id, frame(request))
    sock.sendall(conn.data_to_send())
    reader = MessageReader(MAX_MESSAGE_BYTES)
    messages: list[bytes] = []
    headers: dict[bytes, bytes] | None = None
    trailers: dict[bytes, bytes] = {}
    ended = False
    while not ended:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = sock.recv(READ_CHUNK)
        if not data:
            raise OSError("connection closed before the call ended")
        for event in conn.receive(data):
            if isinstance(event, HeadersReceived) and event.stream_id == stream_id:
                if headers is None:
                    headers = dict(event.fields)
                else:
                    trailers = dict(event.fields)
                ended = event.end_stream
            elif isinstance(event, DataReceived) and event.stream_id == stream_id:
                messages.extend(_read(reader, event.data, method))
                ended = event.end_stream
            elif isinstance(event, StreamReset) and event.stream_id == stream_id:
                code = code_of_reset(event.error_code)
                raise RpcError(code, f"{method}: stream reset by the peer ({error_name(event.error_code)})")
            elif isinstance(event, GoAwayReceived) and not _covers(event, stream_id):
                raise OSError(
                    f"the peer closed the connection (GOAWAY {error_name(event.error_code)},"
                    f" last stream {event.last_stream_id})"
                )
            elif isinstance(event, WindowOpened) and pending:
                pending = _send_what_fits(conn, stream_id, pending)
            if ended:
                break  # the call is over; a reset or GOAWAY after it changes nothing
        outgoing = conn.data_to_send()
        if outgoing and not ended:
            sock.sendall(outgoing)
    headers = headers or {}
    status = status_of(trailers) or status_of(headers)
    http_status = headers.get(b":status", b"")
    if status is None and http_status != b"200":
        status = (
            code_of_http_status(http_status),
            f"{method}: HTTP status {http_status.decode('ascii', 'replace')}",
        )
    if status is None:
        raise RpcError(Code.INTERNAL, f"{method}: the answer carried no grpc-status")
    code, details = status
    if code is not Code.OK:
        raise RpcError(code, details)
    if len(messages) != 1 or reader.partial:
        raise RpcError(Code.INTERNAL, f"{method}: expected one response message, got {len(messages)}")
    return messages[0]


def _read(reader: MessageReader, data: bytes, method: str) -> list[bytes]:
    """The answer messages ``data`` completes; an answer we refuse is a status, as grpc's clients say."""
    try:
        return reader.feed(data)
    except MessageTooLarge as exc:
        raise RpcError(Code.RESOURCE_EXHAUSTED, f"{method}: {exc}") from exc
    except CompressedMessage as exc:
        raise RpcError(Code.INTERNAL, f"{method}: {exc}") from exc


def _covers(goaway: GoAwayReceived, stream_id: int) -> bool:
    """A graceful GOAWAY (NO_ERROR, a last stream id at or past ours) still promises the answer
    (RFC 9113 §6.8); any other means it is not coming."""
    return goaway.error_code == ErrorCode.NO_ERROR and goaway.last_stream_id >= stream_id


def _send_what_fits(conn: Connection, stream_id: int, pending: bytes) -> bytes:
    """Send as much of the request as the window allows, ending the stream with the last byte."""
    while pending:
        window = min(conn.send_window(stream_id), conn.max_outbound_frame_size)
        if window <= 0:
            return pending
        chunk, pending = pending[:window], pending[window:]
        conn.send_data(stream_id, chunk, end_stream=not pending)
    return pending
