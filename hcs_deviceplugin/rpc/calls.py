"""What a method is to the RPC server, and what its handler sees of its call.

Kept apart from the server so a servicer (a pool's, DRA's) names its methods and reads its context
without the HTTP/2 machinery.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.rpc.status import Code, RpcError

log = logging.getLogger(__name__)


class Message(Protocol):
    """What a response is to the server: something that serializes itself (a protobuf message)."""

    def SerializeToString(self) -> bytes: ...


class Encoded:
    """A response encoded once, sent as it is: a constant answer costs no encoding per call."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def SerializeToString(self) -> bytes:
        return self._data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encoded) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self._data)

    def __repr__(self) -> str:
        return f"Encoded({self._data!r})"


_CALLBACKS = threading.Lock()
"""Guards every context's callbacks: they are rare (a stream's), so one lock for all keeps a unary
call from creating any synchronisation object of its own."""
_LAZY = threading.Lock()
"""Guards every :class:`LazyEvent`: few are ever waited on, so one lock serves all."""


class LazyEvent:
    """An event whose ``threading.Event`` (a lock and a condition) is built only once something
    waits on it: the flags of a unary call, which nobody waits on, cost one small object."""

    __slots__ = ("_event", "_set")

    def __init__(self, is_set: bool = False) -> None:
        self._event: threading.Event | None = None
        self._set = is_set

    def is_set(self) -> bool:
        return self._set  # one attribute read: atomic, no lock needed

    def set(self) -> None:
        with _LAZY:
            self._set = True
            event = self._event
        if event is not None:
            event.set()

    def clear(self) -> None:
        with _LAZY:
            self._set = False
            if self._event is not None:
                self._event.clear()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the event; whether it is set."""
        with _LAZY:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


class CallContext:
    """What a handler sees of its call: whether it is still wanted, and how to end it with a status.

    The method names match grpcio's ``ServicerContext`` where they overlap, so handlers read the
    same on either server.
    """

    __slots__ = ("_callbacks", "_cancelled", "_finished", "method")

    def __init__(self, method: str) -> None:
        self.method = method
        self._cancelled = LazyEvent()
        self._callbacks: list[Callable[[], None]] | None = None
        self._finished = False

    def is_active(self) -> bool:
        return not self._cancelled.is_set()

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """Run ``callback`` when the call ends (answered, cancelled or cut); False if it has ended."""
        with _CALLBACKS:
            if self._finished:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(callback)
            return True

    def abort(self, code: Code, details: str) -> NoReturn:
        """End the call with ``code`` and ``details`` (raises; the server sends the status)."""
        raise RpcError(code, details)

    def cancel(self) -> None:
        """End the call from our side: the client sees CANCELLED. Safe from any thread, never blocks.

        A stream ends with a CANCELLED status after the messages it had queued, not with
        RST_STREAM: grpcio's client drops a message it has received but not yet read when a reset
        follows it closely (about one in ten), which lost a draining pool's last, empty list.
        """
        self._cancelled.set()
        self._finish()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the call to be cancelled; whether it was."""
        return self._cancelled.wait(timeout)

    def _finish(self) -> None:
        with _CALLBACKS:
            if self._finished:
                return
            self._finished = True
            callbacks, self._callbacks = self._callbacks or [], None
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("callback of %s failed", self.method)


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class Unary:
    """A unary method: ``parse`` reads the request bytes, ``handle`` answers it.

    ``blocking`` says ``handle`` may wait on I/O (an API read): it then runs on the server's
    worker threads instead of the connection's reader, so a slow call does not hold up the calls
    behind it on the same connection. In-memory handlers (Allocate) stay on the reader: a hand-off
    would only add latency.
    """

    parse: Callable[[bytes], Any]
    handle: Callable[[Any, CallContext], Message]
    blocking: bool = False


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class ServerStream:
    """A server-streaming method: ``handle`` yields the responses."""

    parse: Callable[[bytes], Any]
    handle: Callable[[Any, CallContext], Iterator[Message]]


Method = Unary | ServerStream
UnaryHandler = Callable[[Any, CallContext], Message]
Interceptor = Callable[[str, UnaryHandler], UnaryHandler]
"""Given a method's name and unary handler, the handler to serve instead (a latency observer wraps
it, others return it as it is); asked once per method when a server is built, not per call."""
