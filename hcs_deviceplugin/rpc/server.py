"""A gRPC server on one unix socket: unary methods and server streams, over HTTP/2.

Threads, and why:
- one accept thread per server;
- one reader thread per connection. It parses frames and answers **unary calls inline**: a device
  plugin's unary calls are in-memory lookups, so a hand-off to a worker pool would only add
  latency (the whole point of Allocate's budget);
- one thread per **server stream** (ListAndWatch), which blocks in its generator between messages.

Nothing ever waits with the connection's lock held. Sends never block: what does not fit in the
peer's flow-control window is queued per call and pumped out when a WINDOW_UPDATE arrives, and what
the socket does not take at once waits in the connection's unsent buffer, which the reader thread
(polling the socket for both directions) writes out as the socket drains. So a reader answering a
call cannot deadlock against the window or the socket it is the one to read, a RST_STREAM or
GOAWAY is always read, and a cancel or stop never waits behind a stuck send. Pumping stops while
:data:`UNSENT_LIMIT_BYTES` are unsent, and a stream's producer is held back once its own queue
passes :data:`STREAM_BACKLOG_BYTES`, so a client that stops reading costs bounded memory; the
producer's wait ends the moment the call is cancelled or the connection closes.

A peer that takes nothing we send for :data:`SEND_TIMEOUT_S` is dropped. A client that connects
and says nothing is dropped after :data:`HANDSHAKE_TIMEOUT_S`, and when
:data:`MAX_CONNECTIONS` are open the longest-idle one without a call makes room for a newcomer, so
idle sockets cannot lock kubelet out.

HTTP/2 itself is :mod:`hcs_deviceplugin.rpc.http2`'s, which keeps serving the calls a GOAWAY (either
way) leaves open, as the gRPC spec (and RFC 9113 §6.8) wants: after ours, streams above its last id
are refused and those up to it answered in full; after the client's, its calls in flight are
answered, then the connection closes (at once if its GOAWAY carries an error).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hcs_deviceplugin.rpc.calls import (
    CallContext,
    Interceptor,
    LazyEvent,
    Method,
    ServerStream,
    Unary,
    UnaryHandler,
)
from hcs_deviceplugin.rpc.frames import ErrorCode, encode_fields, error_name
from hcs_deviceplugin.rpc.http2 import (
    Connection,
    ConnectionFailed,
    DataReceived,
    GoAwayReceived,
    HeadersReceived,
    SettingsReceived,
    StreamGone,
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
    frame,
    status_headers,
)
from hcs_deviceplugin.rpc.workers import Workers

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
"""Connections one server keeps at once; kubelet holds one, probes come and go."""
MAX_CONCURRENT_STREAMS = 100
STREAM_BACKLOG_BYTES = 4 * 1024 * 1024
"""Bytes a server stream may have queued for a client that does not read before its producer waits."""
RECEIVE_WINDOW = 1024 * 1024
"""Our flow-control window for what clients send (requests are small; this spares WINDOW_UPDATEs)."""
WORKERS = 8
"""Threads for blocking unary calls (see :class:`Unary`), per server."""
SEND_TIMEOUT_S = 10.0
"""How long a peer may take none of what we have to send before the connection is dropped."""
UNSENT_LIMIT_BYTES = 256 * 1024
"""Bytes framed but not yet taken by the socket at which pumping pauses until the socket drains."""
READ_PAUSE_BYTES = 4 * UNSENT_LIMIT_BYTES
"""Unsent bytes at which we stop reading too: a client that sends (PINGs, say) but never reads
would otherwise grow the unsent buffer with our answers until the send timeout."""
HANDSHAKE_TIMEOUT_S = 5.0
"""How long a new connection may take to send the HTTP/2 preface and its SETTINGS."""
ACCEPT_RETRY_S = 0.05
"""Pause after a failed accept (out of file descriptors, say) so the loop does not spin."""
READ_CHUNK = 65536
_RESPONSE_HEADERS = [(b":status", b"200"), (b"content-type", CONTENT_TYPE)]
_UNSUPPORTED_MEDIA_TYPE = [(b":status", b"415"), (b"content-type", CONTENT_TYPE)]
_RESPONSE_BLOCK = encode_fields(_RESPONSE_HEADERS)
"""The response headers of every call, encoded once (our blocks never touch HPACK's table)."""
_OK_BLOCK = encode_fields(status_headers(Code.OK, ""))
"""The trailers of every call that ends well, encoded once."""


def _trailers(code: Code, details: str) -> bytes:
    return _OK_BLOCK if code is Code.OK and not details else encode_fields(status_headers(code, details))


def _is_grpc(content_type: bytes) -> bool:
    """``application/grpc``, alone or with a ``+format`` or parameters (the spec's Content-Type)."""
    return content_type == CONTENT_TYPE or content_type.startswith((CONTENT_TYPE + b"+", CONTENT_TYPE + b";"))


class _Call:
    """One HTTP/2 stream: its request as it arrives, and what is queued to go out."""

    def __init__(self, stream_id: int, method_name: str, method: Method | None) -> None:
        self.stream_id = stream_id
        self.method = method
        self.context = CallContext(method_name)
        self.reader = MessageReader(MAX_MESSAGE_BYTES)
        self.requests: list[bytes] = []
        self.outbound: deque[memoryview] = deque()
        self.queued = 0
        self.headers_sent = False
        self.trailers: bytes | None = None
        """The encoded trailers, once the call has its status."""
        self.drained = LazyEvent(is_set=True)
        """Set while the producer of a stream may queue more (see :data:`STREAM_BACKLOG_BYTES`)."""
        self.closed = False
        self.request_ended = False
        self.error: tuple[Code, str] | None = None
        self.http_status: list[tuple[bytes, bytes]] = _RESPONSE_HEADERS
        self.context.add_callback(self.drained.set)  # a producer waiting for room wakes when it ends


class _Connection:
    """One client connection: its reader thread, its HTTP/2 state and the calls on it."""

    def __init__(self, server: RpcServer, sock: socket.socket) -> None:
        self._server = server
        self._sock = sock
        self._h2 = Connection(
            client_side=False, receive_window=RECEIVE_WINDOW, max_streams=MAX_CONCURRENT_STREAMS
        )
        self._lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._closed = False
        self._greeted = False
        self._last_stream_id: int | None = None
        """Set once our GOAWAY went out: streams above it are refused, those up to it answered."""
        self._client_leaving = False
        """The client sent GOAWAY: its calls in flight are answered, then the connection closes."""
        self._unsent = bytearray()
        self._stalled_since: float | None = None
        """When the socket last took bytes while more were waiting (None: nothing waits)."""
        self._held_by_budget = False
        """The last pump left a call's bytes queued that its window allows, for the unsent budget
        alone: the reader pumps again once the socket has room, even if it took every unsent byte
        at once (then no unsent byte, and maybe no client frame, would ever wake it)."""
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.last_active = time.monotonic()
        self.thread = threading.Thread(target=self._run, name=f"{server.name}-conn", daemon=True)

    # -- reader ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._greet()
            self._serve()
        except (OSError, ConnectionFailed) as exc:
            if not self._closed:
                log.debug("%s: connection ended: %s", self._server.name, exc)
        except Exception:
            log.exception("%s: connection reader failed", self._server.name)
        finally:
            self.close()
            self._release()
            self._server._forget(self)

    def _greet(self) -> None:
        with self._lock:
            self._h2.start()
            self._flush_locked()

    def _serve(self) -> None:
        """Read, and write what waits, as the socket allows, until the peer or we end it."""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        opened = time.monotonic()
        while not self._closed:
            with self._lock:
                unsent = len(self._unsent)
                stalled_since = self._stalled_since
                held = self._held_by_budget
                if self._client_leaving and not self._calls and not unsent:
                    return  # all it asked for is answered
            reading = select.POLLIN if unsent < READ_PAUSE_BYTES else 0
            poller.register(self._sock, reading | (select.POLLOUT if unsent or held else 0))
            deadline = None if self._greeted else opened + HANDSHAKE_TIMEOUT_S
            if stalled_since is not None:
                stall_end = stalled_since + SEND_TIMEOUT_S
                deadline = stall_end if deadline is None else min(deadline, stall_end)
            wait_ms = None if deadline is None else max(int((deadline - time.monotonic()) * 1000), 0)
            ready = dict(poller.poll(wait_ms))
            if self._wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 4096)
            if deadline is not None and time.monotonic() >= deadline:  # busy or not
                reason = "sent no HTTP/2 preface" if not self._greeted else "took nothing we sent"
                raise TimeoutError(f"the client {reason} in time")
            flags = ready.get(self._sock.fileno(), 0)
            if flags & select.POLLOUT:
                with self._lock:
                    self._write_locked()
                    self._pump_locked()
                    self._flush_locked()
            if flags & (select.POLLIN | select.POLLHUP | select.POLLERR):
                data = self._sock.recv(READ_CHUNK)
                if not data:
                    return
                self.last_active = time.monotonic()
                for call in self._receive(data):
                    self._dispatch(call)

    def _receive(self, data: bytes) -> list[_Call]:
        """Feed bytes to the HTTP/2 state; the calls whose request is complete, to dispatch outside
        the lock."""
        ready: list[_Call] = []
        with self._lock:
            try:
                events = self._h2.receive(data)
            except ConnectionFailed:
                self._flush_locked()  # the GOAWAY that says why
                raise
            pump = False
            for event in events:
                if isinstance(event, DataReceived):
                    self._data_locked(event, ready)
                elif isinstance(event, HeadersReceived):
                    call = self._calls.get(event.stream_id)
                    if call is None:
                        self._open_call_locked(event)
                    elif event.end_stream:  # trailers from the client end its request
                        self._request_ended_locked(call, ready)
                elif isinstance(event, WindowOpened):
                    pump = True
                elif isinstance(event, StreamReset):
                    call = self._calls.pop(event.stream_id, None)
                    if call is not None:
                        call.closed = True
                        call.context.cancel()
                elif isinstance(event, SettingsReceived):
                    pump = True
                    self._greeted = True  # the preface is complete: no more handshake deadline
                elif isinstance(event, GoAwayReceived):
                    self._client_leaving = True
                    if event.error_code != ErrorCode.NO_ERROR:
                        raise OSError(
                            errno.ECONNRESET,
                            f"the client went away with error {error_name(event.error_code)}",
                        )
            if pump:
                self._pump_locked()
            self._flush_locked()
        return ready

    def _open_call_locked(self, event: HeadersReceived) -> None:
        headers = dict(event.fields)
        name = headers.get(b":path", b"").decode("utf-8", "replace")
        call = _Call(event.stream_id, name, self._server.methods.get(name))
        if self._last_stream_id is not None and event.stream_id > self._last_stream_id:
            # Opened after our GOAWAY crossed it: refused, so the client may retry elsewhere.
            self._h2.reset_stream(event.stream_id, ErrorCode.REFUSED_STREAM)
            return
        self._calls[event.stream_id] = call
        content_type = headers.get(b"content-type", b"")
        if not _is_grpc(content_type):
            call.error = (Code.INTERNAL, f"not a gRPC request (content-type {content_type!r})")
            call.http_status = _UNSUPPORTED_MEDIA_TYPE
        elif headers.get(b":method") != b"POST":
            call.error = (Code.INTERNAL, f"gRPC requests are POSTs, not {headers.get(b':method')!r}")
        elif headers.get(b"grpc-encoding", b"identity") != b"identity":
            call.error = (Code.UNIMPLEMENTED, "compression is not supported")
        elif call.method is None:
            call.error = (Code.UNIMPLEMENTED, f"Method not found: {name}")
        call.request_ended = event.end_stream
        if call.error is not None:  # at once, as grpc-go does, not after a request we would discard
            self._refuse_locked(call, *call.error)
        elif call.request_ended:
            self._request_complete_locked(call, [])

    def _data_locked(self, event: DataReceived, ready: list[_Call]) -> None:
        call = self._calls.get(event.stream_id)
        if call is None or call.closed or call.error is not None:
            return
        if event.data:
            try:
                call.requests.extend(call.reader.feed(event.data))
            except MessageTooLarge as exc:
                self._refuse_locked(call, Code.RESOURCE_EXHAUSTED, str(exc))
                return
            except CompressedMessage as exc:
                self._refuse_locked(call, Code.UNIMPLEMENTED, str(exc))
                return
            if len(call.requests) > 1:  # every method takes one request: more would only pile up
                self._refuse_locked(call, Code.INTERNAL, "expected one request message, got more")
                return
        if event.end_stream:
            self._request_ended_locked(call, ready)

    def _request_ended_locked(self, call: _Call, ready: list[_Call]) -> None:
        if not call.closed:
            call.request_ended = True
            self._request_complete_locked(call, ready)

    def _request_complete_locked(self, call: _Call, ready: list[_Call]) -> None:
        if call.error is not None:
            self._refuse_locked(call, *call.error)
        elif len(call.requests) != 1 or call.reader.partial:
            self._refuse_locked(
                call, Code.INTERNAL, f"expected one request message, got {len(call.requests)}"
            )
        else:
            ready.append(call)

    def _refuse_locked(self, call: _Call, code: Code, details: str) -> None:
        """Answer with a status only (a "trailers-only" response) and forget the call.

        A client still sending its request is then told to stop with RST_STREAM NO_ERROR, as RFC
        9113 §8.1 allows after a complete response (grpc-go's server does the same), instead of
        pushing the rest of a refused 16 MiB message at us.
        """
        if call.closed:
            return
        call.closed = True
        self._calls.pop(call.stream_id, None)
        with contextlib.suppress(StreamGone):
            block = encode_fields(call.http_status + status_headers(code, details))
            self._h2.send_header_block(call.stream_id, block, end_stream=True)
        if not call.request_ended:
            self._h2.reset_stream(call.stream_id, ErrorCode.NO_ERROR)
        call.context._finish()

    # -- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, call: _Call) -> None:
        method = call.method
        try:
            request = method.parse(call.requests[0]) if method is not None else None
        except Exception as exc:
            self._finish(call, None, Code.INTERNAL, f"could not parse the request: {exc}")
            return
        if isinstance(method, Unary) and method.blocking:
            if not self._server.workers.submit(lambda: self._answer_unary(call, method, request)):
                self._finish(call, None, Code.UNAVAILABLE, "the server is stopping")
        elif isinstance(method, Unary):
            self._answer_unary(call, method, request)
        elif isinstance(method, ServerStream):
            thread = threading.Thread(
                target=self._run_stream,
                args=(call, method, request),
                name=f"{self._server.name}-stream",
                daemon=True,
            )
            try:
                thread.start()
            except RuntimeError as exc:  # out of threads: this call fails, the connection lives
                self._finish(call, None, Code.RESOURCE_EXHAUSTED, f"no thread for the stream: {exc}")

    def _answer_unary(self, call: _Call, method: Unary, request: Any) -> None:
        try:
            response = self._server.unary_handler(call.context.method, method)(request, call.context)
            payload = frame(response.SerializeToString())
        except RpcError as exc:
            self._finish(call, None, exc.code, exc.details)
        except Exception as exc:
            log.exception("%s: %s failed", self._server.name, call.context.method)
            self._finish(call, None, Code.UNKNOWN, f"Exception calling application: {exc}")
        else:
            self._finish(call, payload, Code.OK, "")

    def _run_stream(self, call: _Call, method: ServerStream, request: Any) -> None:
        code, details = Code.OK, ""
        try:
            with contextlib.closing(method.handle(request, call.context)) as responses:  # type: ignore[type-var]
                for response in responses:
                    if call.context.cancelled:
                        break
                    self._send_message(call, frame(response.SerializeToString()))
        except RpcError as exc:
            code, details = exc.code, exc.details
        except Exception as exc:
            log.exception("%s: %s failed", self._server.name, call.context.method)
            code, details = Code.UNKNOWN, f"Exception calling application: {exc}"
        if call.context.cancelled:  # by us (a client's reset or hang-up has closed the call already)
            code, details = Code.CANCELLED, "the server ended the call"
        self._finish(call, None, code, details)

    # -- sending -----------------------------------------------------------------------------

    def _send_message(self, call: _Call, payload: bytes) -> None:
        """Queue one message of a stream; waits (without a lock) while its backlog is too large."""
        while not call.context.cancelled and not call.closed:
            with self._lock:
                if call.closed:  # reset while we waited for the lock
                    return
                if call.queued < STREAM_BACKLOG_BYTES:
                    if self._start_response_locked(call):
                        call.outbound.append(memoryview(payload))
                        call.queued += len(payload)
                        self._pump_locked()
                    self._flush_locked()
                    return
                call.drained.clear()
            call.drained.wait(1.0)

    def _finish(self, call: _Call, payload: bytes | None, code: Code, details: str) -> None:
        """Queue the last message (if any) and the status; sent as the window allows."""
        with self._lock:
            if call.closed or self._closed:
                call.context._finish()
                return
            if payload is None and not call.headers_sent and not call.outbound:
                self._refuse_locked(call, code, details)
            elif self._start_response_locked(call):
                if payload is not None:
                    call.outbound.append(memoryview(payload))
                    call.queued += len(payload)
                call.trailers = _trailers(code, details)
                self._pump_locked()
            self._flush_locked()

    def _start_response_locked(self, call: _Call) -> bool:
        """Send the response headers once; False if the stream is gone (reset: then so is the call)."""
        if not call.headers_sent:
            try:
                self._h2.send_header_block(call.stream_id, _RESPONSE_BLOCK)
            except StreamGone as exc:
                log.debug("%s: stream %d: %s", self._server.name, call.stream_id, exc)
                call.closed = True
                self._calls.pop(call.stream_id, None)
                call.context.cancel()
                return False
            call.headers_sent = True
        return True

    def _pump_locked(self) -> None:
        """Send what the windows allow, call by call, and the trailers of calls with nothing left;
        nothing while :data:`UNSENT_LIMIT_BYTES` wait for the socket."""
        budget = UNSENT_LIMIT_BYTES - len(self._unsent)
        self._held_by_budget = False
        for call in list(self._calls.values()):
            if call.closed:
                continue
            try:
                budget = self._pump_call_locked(call, budget)
            except StreamGone as exc:  # the stream closed under us
                log.debug("%s: stream %d: %s", self._server.name, call.stream_id, exc)
                call.closed = True
                self._calls.pop(call.stream_id, None)
                call.context.cancel()

    def _pump_call_locked(self, call: _Call, budget: int) -> int:
        """Pump one call within ``budget`` bytes; the budget left."""
        while call.outbound:
            window = min(self._h2.send_window(call.stream_id), self._h2.max_outbound_frame_size)
            if window <= 0 or budget <= 0:
                self._held_by_budget |= window > 0
                return budget
            chunk = call.outbound[0]
            if len(chunk) > window:
                call.outbound[0] = chunk[window:]
                chunk = chunk[:window]
            else:
                call.outbound.popleft()
            self._h2.send_data(call.stream_id, bytes(chunk))
            call.queued -= len(chunk)
            budget -= len(chunk)
        call.drained.set()
        if call.trailers is not None:
            self._h2.send_header_block(call.stream_id, call.trailers, end_stream=True)
            call.closed = True
            self._calls.pop(call.stream_id, None)
            call.context._finish()
        return budget

    def _flush_locked(self) -> None:
        self._send_locked(self._h2.data_to_send())

    def _send_locked(self, data: bytes) -> None:
        """Queue ``data`` behind what is unsent and write what the socket takes now (never waits)."""
        if self._closed:
            return
        was_empty = not self._unsent
        self._unsent += data
        self._write_locked()
        if (
            (was_empty and self._unsent) or self._held_by_budget
        ) and threading.get_ident() != self.thread.ident:
            with contextlib.suppress(BlockingIOError):  # full: the reader is awake already
                os.write(self._wake_write, b"w")  # the reader polls for writability from now on

    def _write_locked(self) -> None:
        while self._unsent and not self._closed:
            try:
                sent = self._sock.send(self._unsent, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError:
                self._closed = True
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
                return
            del self._unsent[:sent]
            self._stalled_since = time.monotonic()
        if not self._unsent:
            self._stalled_since = None
        elif self._stalled_since is None:
            self._stalled_since = time.monotonic()

    # -- closing -----------------------------------------------------------------------------

    def goaway(self) -> None:
        """Tell the client no new calls will be taken here (calls in flight go on): streams it
        opens after this are refused."""
        with self._lock:
            if self._closed or self._last_stream_id is not None:
                return
            self._last_stream_id = self._h2.highest_inbound_stream_id
            self._h2.goaway(self._last_stream_id)
            self._flush_locked()

    def busy(self) -> bool:
        """A call is open here, or what was sent has not all left for the socket yet."""
        with self._lock:
            return bool(self._calls) or bool(self._unsent)

    def idle(self) -> bool:
        """No call is open here (nothing lost if the connection makes room for another).

        Never waits: a lock held by a send blocked on the client means the connection is busy,
        and the accept thread asking must not stall behind it.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return not self._calls
        finally:
            self._lock.release()

    def abandon(self) -> None:
        """Release a connection whose reader thread never started."""
        self.close()
        self._release()
        self._server._forget(self)

    def close(self) -> None:
        """Cut the connection: every call on it is cancelled and the reader thread ends.

        The reader closes the descriptors (:meth:`_release`); closing them here could hand their
        numbers to new files that the reader would then poll or a sender write to.
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
            calls = list(self._calls.values())
        for call in calls:  # outside the lock: cancel runs the handlers' callbacks
            call.closed = True
            call.context.cancel()

    def _release(self) -> None:
        """Close the descriptors; once closed (under the lock), no sender touches them again."""
        with self._lock:
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.close()
            os.close(self._wake_read)
            os.close(self._wake_write)


class RpcServer:
    """Serves ``methods`` (``/package.Service/Method`` → method) on the unix socket ``path``.

    ``interceptors`` wrap each unary handler once, in order; ``name`` names threads and logs.
    The caller prepares the socket path (nothing may be there) and removes it after :meth:`stop`.
    """

    def __init__(
        self,
        path: Path,
        methods: Mapping[str, Method],
        name: str = "rpc",
        interceptors: Sequence[Interceptor] = (),
    ) -> None:
        self.path = path
        self.methods = dict(methods)
        self.name = name
        self._handlers: dict[str, UnaryHandler] = {}
        for method_name, method in self.methods.items():
            if isinstance(method, Unary):
                handler = method.handle
                for intercept in interceptors:
                    handler = intercept(method_name, handler)
                self._handlers[method_name] = handler
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._stopped = threading.Event()
        self._all_closed = threading.Event()
        self._accept_thread: threading.Thread | None = None
        self._accepted = 0
        self.workers = Workers(name, WORKERS)

    @property
    def connections_accepted(self) -> int:
        """How many connections this server has accepted since it started (closed ones included)."""
        with self._lock:
            return self._accepted

    def unary_handler(self, method_name: str, method: Unary) -> UnaryHandler:
        """``method``'s handler as wrapped when the server was built."""
        return self._handlers.get(method_name, method.handle)

    def start(self) -> None:
        """Bind and listen (errors propagate: the caller's rebuild retries), then accept in a thread.

        Once this returns the socket takes connections: the kernel queues them (backlog 128) until
        the accept thread takes them, so a client may dial at once.
        """
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(os.fspath(self.path))
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._accept_thread = threading.Thread(target=self._accept, name=f"{self.name}-accept", daemon=True)
        self._accept_thread.start()

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopped.is_set():
            try:
                sock, _ = listener.accept()
            except OSError as exc:
                if self._stopped.is_set():
                    return
                log.warning("%s: accept failed: %s", self.name, exc)
                self._stopped.wait(ACCEPT_RETRY_S)
                continue
            if not self._make_room():
                sock.close()
                log.warning("%s: %d connections open, all busy; refusing another", self.name, MAX_CONNECTIONS)
                continue
            with self._lock:
                if self._stopped.is_set():
                    sock.close()
                    return
                connection = _Connection(self, sock)
                self._connections.add(connection)
                self._accepted += 1
                self._all_closed.clear()
            try:
                connection.thread.start()
            except RuntimeError as exc:  # out of threads: drop this one, keep accepting
                log.warning("%s: no thread for a new connection: %s", self.name, exc)
                connection.abandon()

    def _make_room(self) -> bool:
        """Below :data:`MAX_CONNECTIONS`, or made so by closing the longest-idle connection with no
        call open (a probe that never hung up, a client that connected and went quiet); False if
        every connection has a call open."""
        with self._lock:
            if len(self._connections) < MAX_CONNECTIONS:
                return True
            connections = sorted(self._connections, key=lambda c: c.last_active)
        for connection in connections:
            if connection.idle():
                log.warning("%s: %d connections open; closing the longest idle", self.name, MAX_CONNECTIONS)
                connection.goaway()
                connection.close()
                with self._lock:
                    self._connections.discard(connection)
                return True
        return False

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)
            if not self._connections:
                self._all_closed.set()

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop taking connections; with ``grace``, let the calls in flight finish for that long.

        A stream's owner ends it first when it wants a clean end; the grace is what lets that end
        (its last message and its status) reach the client: cutting the connection right behind
        them makes grpcio's client drop a message it has received but not yet read. A stream still
        running when the grace is over is cut, as every call is without one. Returns an event set
        once every connection is closed.
        """
        self._stopped.set()
        self.workers.stop()
        listener = self._listener
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            connections = list(self._connections)
            if not connections:
                self._all_closed.set()
        if grace:
            for connection in connections:
                connection.goaway()
            deadline = time.monotonic() + grace
            while any(c.busy() for c in connections) and time.monotonic() < deadline:
                self._all_closed.wait(0.01)
        for connection in connections:
            connection.close()
        return self._all_closed
