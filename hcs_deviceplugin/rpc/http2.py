"""An HTTP/2 connection's state, either side, without I/O: bytes in, events out, bytes to send.

What gRPC over a unix socket needs of RFC 9113 and no more: streams, flow control both ways,
SETTINGS, PING, RST_STREAM, GOAWAY, HEADERS with CONTINUATION and padding; no server push, no
priorities (read and ignored). Every rule of the RFC on what a peer may send is checked, the
error made a stream error (RST_STREAM, the connection goes on) where the RFC allows one and a
connection error (:class:`ConnectionFailed`, after a GOAWAY that says why) otherwise.

Why our own rather than ``h2``'s: h2 spends most of a call's CPU on generality a device plugin
never uses (every frame is rendered with ``repr`` for a log line before it is read, events are
class hierarchies, every stream keeps a state machine), and reading it cost a daemon's start
~20 ms of imports. It also treats a connection as over once a GOAWAY has passed either way, while
the gRPC spec wants the calls a graceful GOAWAY names answered in full; here a GOAWAY is one more
event and nothing closes until its owner says so.

Closed streams are forgotten at once: a frame for a stream id below the highest seen that is not
open is for a closed stream, which RFC 9113 §5.1 lets us answer (or ignore) without a record, so a
connection carrying millions of calls keeps no state per call past its end.
"""

from __future__ import annotations

import re
from typing import cast

import hpack
import hpack.exceptions

from hcs_deviceplugin.rpc.frames import (
    CONTINUATION,
    DATA,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_WINDOW,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    FLAG_PRIORITY,
    FRAME_HEADER_BYTES,
    GOAWAY,
    HEADERS,
    LARGEST_MAX_FRAME_SIZE,
    MAX_WINDOW,
    PING,
    PREFACE,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    STREAM_ID_MASK,
    WINDOW_UPDATE,
    ErrorCode,
    Setting,
    encode_fields,
    frame_bytes,
    goaway_frame,
    read_frame_header,
    rst_stream_frame,
    settings_frame,
    window_update_frame,
)

MAX_HEADER_LIST_SIZE = 16_384
"""Decoded header bytes (RFC 9113's size: names + values + 32 each) we take in one block."""
MAX_HEADER_BLOCK_BYTES = 65_536
"""Encoded header bytes, over HEADERS and its CONTINUATIONs, before the block is refused."""
_CONNECTION_SPECIFIC = frozenset(
    (b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade")
)
_REQUEST_PSEUDO = frozenset((b":method", b":scheme", b":path", b":authority"))
_FIELD_NAME = re.compile(rb":?[!#$%&'*+\-.^_`|~0-9a-z]+")
"""A field name: token characters, lowercase (RFC 9110 §5.1, RFC 9113 §8.2.1), or a pseudo-field's."""
_FIELD_VALUE = re.compile(rb"(?:[^\x00\r\n \t](?:[^\x00\r\n]*[^\x00\r\n \t])?)?")
"""A field value: no NUL, CR or LF, and no space or tab at either end (RFC 9113 §8.2.1)."""
_ONE_BYTE_INDEXED = bytes(range(0x81, 0xFF))
"""Bytes that are each a whole indexed field (RFC 7541 §6.1, index 1-126): a block of only these
changes no HPACK table."""
INDEXED_BLOCKS_KEPT = 64


class ConnectionFailed(Exception):
    """The peer broke the protocol; the GOAWAY that says so is queued. The connection must close."""

    def __init__(self, error_code: ErrorCode, reason: str) -> None:
        super().__init__(f"{error_code.name}: {reason}")
        self.error_code = error_code


class StreamGone(Exception):
    """A send on a stream that is closed or was reset (by the peer, or by us for its error)."""


class _StreamError(Exception):
    """Internal: end this stream with RST_STREAM ``error_code``; the connection goes on."""

    def __init__(self, error_code: ErrorCode) -> None:
        self.error_code = error_code


# -- events --------------------------------------------------------------------------------------


class HeadersReceived:
    """A complete header block on a stream: a request (server) or response or trailers (client)."""

    __slots__ = ("end_stream", "fields", "stream_id")

    def __init__(self, stream_id: int, fields: list[tuple[bytes, bytes]], end_stream: bool) -> None:
        self.stream_id = stream_id
        self.fields = fields
        self.end_stream = end_stream


class DataReceived:
    """DATA on an open stream (already counted and acknowledged for flow control)."""

    __slots__ = ("data", "end_stream", "stream_id")

    def __init__(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        self.stream_id = stream_id
        self.data = data
        self.end_stream = end_stream


class StreamReset:
    """A stream ended by RST_STREAM: the peer's, or ours for the peer's stream error."""

    __slots__ = ("error_code", "stream_id")

    def __init__(self, stream_id: int, error_code: int) -> None:
        self.stream_id = stream_id
        self.error_code = error_code


class WindowOpened:
    """The peer gave more send window (on the connection, or a stream), or changed settings."""

    __slots__ = ()


class SettingsReceived:
    """The peer's SETTINGS (the first ones complete a server's handshake)."""

    __slots__ = ()


class PingAcknowledged:
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class GoAwayReceived:
    __slots__ = ("error_code", "last_stream_id")

    def __init__(self, last_stream_id: int, error_code: int) -> None:
        self.last_stream_id = last_stream_id
        self.error_code = error_code


Event = (
    HeadersReceived
    | DataReceived
    | StreamReset
    | WindowOpened
    | SettingsReceived
    | PingAcknowledged
    | GoAwayReceived
)
_WINDOW_OPENED = WindowOpened()


class _Stream:
    __slots__ = ("headers_done", "local_closed", "recv_unacked", "remote_closed", "send_window")

    def __init__(self, send_window: int) -> None:
        self.send_window = send_window
        self.recv_unacked = 0
        self.remote_closed = False
        self.local_closed = False
        self.headers_done = False


class Connection:
    """One side of an HTTP/2 connection.

    ``receive`` takes bytes as they come and returns events; ``send_*`` queue frames;
    ``data_to_send`` hands over what is queued. Not thread-safe: its owner serialises access.
    ``receive_window`` is the flow-control window we grant, per stream and for the connection.
    """

    def __init__(
        self, client_side: bool, receive_window: int = DEFAULT_WINDOW, max_streams: int = 100
    ) -> None:
        self.client_side = client_side
        self.highest_inbound_stream_id = 0
        self._next_stream_id = 1
        self._streams: dict[int, _Stream] = {}
        self._out = bytearray()
        self._in = bytearray()
        self._preface_left = 0 if client_side else len(PREFACE)
        self._settings_seen = False
        self._closed = False
        self._receive_window = receive_window
        self._max_streams = max_streams
        self._connection_recv = DEFAULT_WINDOW
        self._connection_unacked = 0
        self.connection_send_window = DEFAULT_WINDOW
        self._peer_initial_window = DEFAULT_WINDOW
        self.max_outbound_frame_size = DEFAULT_MAX_FRAME_SIZE
        self._table_size_update: int | None = None
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = MAX_HEADER_LIST_SIZE
        self._indexed_blocks: dict[bytes, list[tuple[bytes, bytes]]] = {}
        """Decoded blocks that are only one-byte indexed fields (see :meth:`_decode`); the lists
        are shared, so every reader of an event's fields only reads them."""
        self._valid_fields: list[tuple[bytes, bytes]] | None = None
        self._block: bytearray | None = None
        """A header block awaiting CONTINUATION frames (its stream and flags below)."""
        self._block_stream = 0
        self._block_flags = 0

    # -- set-up --------------------------------------------------------------------------------

    def start(self) -> None:
        """Queue our side's opening: the client preface (client), SETTINGS, the larger window."""
        settings = [
            (Setting.ENABLE_PUSH, 0),
            (Setting.MAX_CONCURRENT_STREAMS, self._max_streams),
            (Setting.INITIAL_WINDOW_SIZE, self._receive_window),
            (Setting.MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_SIZE),
        ]
        if self.client_side:
            self._out += PREFACE
        self._out += settings_frame(settings)
        if self._receive_window > DEFAULT_WINDOW:
            self._out += window_update_frame(0, self._receive_window - DEFAULT_WINDOW)
            self._connection_recv = self._receive_window

    def open_stream(self) -> int:
        """A new stream of ours (client side): its id."""
        stream_id = self._next_stream_id
        self._next_stream_id += 2
        self._streams[stream_id] = _Stream(self._peer_initial_window)
        return stream_id

    # -- what goes out -------------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def send_window(self, stream_id: int) -> int:
        """Bytes of DATA ``stream_id`` may send now (0 for a stream that is gone)."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return 0
        return max(min(stream.send_window, self.connection_send_window), 0)

    def is_open(self, stream_id: int) -> bool:
        return stream_id in self._streams

    def send_headers(
        self, stream_id: int, fields: list[tuple[bytes, bytes]], end_stream: bool = False
    ) -> None:
        self.send_header_block(stream_id, self._encode(fields), end_stream)

    def send_header_block(self, stream_id: int, block: bytes, end_stream: bool = False) -> None:
        """Send an encoded block (see :func:`frames.encode_fields`); StreamGone if the stream is."""
        stream = self._sendable(stream_id)
        if self._table_size_update is not None:  # the update must lead the next block we send
            block = encode_fields((), self._table_size_update) + block
            self._table_size_update = None
        flags = FLAG_END_STREAM if end_stream else 0
        limit = self.max_outbound_frame_size
        if len(block) <= limit:
            self._out += frame_bytes(HEADERS, flags | FLAG_END_HEADERS, stream_id, block)
        else:
            pieces = [block[i : i + limit] for i in range(0, len(block), limit)]
            self._out += frame_bytes(HEADERS, flags, stream_id, pieces[0])
            for index, piece in enumerate(pieces[1:], start=2):
                last = FLAG_END_HEADERS if index == len(pieces) else 0
                self._out += frame_bytes(CONTINUATION, last, stream_id, piece)
        if end_stream:
            self._end_local(stream_id, stream)

    def send_data(self, stream_id: int, data: bytes, end_stream: bool = False) -> None:
        """Send DATA that fits :meth:`send_window` and the peer's frame size (the caller splits)."""
        stream = self._sendable(stream_id)
        size = len(data)
        if size > min(stream.send_window, self.connection_send_window, self.max_outbound_frame_size):
            raise ValueError(f"{size} bytes of DATA do not fit the window or the frame size")
        stream.send_window -= size
        self.connection_send_window -= size
        self._out += frame_bytes(DATA, FLAG_END_STREAM if end_stream else 0, stream_id, data)
        if end_stream:
            self._end_local(stream_id, stream)

    def reset_stream(self, stream_id: int, error_code: ErrorCode) -> None:
        """End a stream with RST_STREAM (nothing if it is gone already)."""
        if self._streams.pop(stream_id, None) is not None:
            self._out += rst_stream_frame(stream_id, error_code)

    def ping(self, data: bytes) -> None:
        self._out += frame_bytes(PING, 0, 0, data)

    def goaway(self, last_stream_id: int, error_code: ErrorCode = ErrorCode.NO_ERROR) -> None:
        """Queue a GOAWAY; streams go on as they were (their owner decides what to answer)."""
        self._out += goaway_frame(last_stream_id, error_code)

    def _sendable(self, stream_id: int) -> _Stream:
        stream = self._streams.get(stream_id)
        if stream is None or stream.local_closed or self._closed:
            raise StreamGone(f"stream {stream_id} is closed")
        return stream

    def _end_local(self, stream_id: int, stream: _Stream) -> None:
        stream.local_closed = True
        if stream.remote_closed:
            del self._streams[stream_id]

    def _encode(self, fields: list[tuple[bytes, bytes]]) -> bytes:
        return encode_fields(fields)

    # -- what comes in -------------------------------------------------------------------------

    def receive(self, data: bytes) -> list[Event]:
        """Take ``data``; the events of the frames it completes. ConnectionFailed on a connection
        error (the GOAWAY is queued: send it, then close)."""
        if self._closed:
            return []
        buffer = self._in
        buffer += data
        events: list[Event] = []
        position = 0
        try:
            if self._preface_left:
                position = self._read_preface(buffer)
            end = len(buffer)
            while end - position >= FRAME_HEADER_BYTES:
                length, kind, flags, stream_id = read_frame_header(buffer, position)
                if length > DEFAULT_MAX_FRAME_SIZE:
                    raise ConnectionFailed(
                        ErrorCode.FRAME_SIZE_ERROR,
                        f"a frame of {length} bytes; SETTINGS_MAX_FRAME_SIZE is {DEFAULT_MAX_FRAME_SIZE}",
                    )
                start = position + FRAME_HEADER_BYTES
                if end - start < length:
                    break
                position = start + length
                self._frame(kind, flags, stream_id, bytes(buffer[start:position]), events)
        except ConnectionFailed as exc:
            self._fail(exc.error_code, str(exc))
            raise
        del buffer[:position]
        return events

    def _read_preface(self, buffer: bytearray) -> int:
        done = len(PREFACE) - self._preface_left
        take = min(self._preface_left, len(buffer))
        if buffer[:take] != PREFACE[done : done + take]:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "not the HTTP/2 client preface")
        self._preface_left -= take
        return take

    def _fail(self, error_code: ErrorCode, reason: str) -> None:
        if not self._closed:
            self._closed = True
            self._out += goaway_frame(self.highest_inbound_stream_id, error_code, reason.encode()[:256])

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if self._block is not None and (kind != CONTINUATION or stream_id != self._block_stream):
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "a header block was not continued")
        if not self._settings_seen and kind != SETTINGS:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "the first frame was not SETTINGS")
        try:
            if kind == DATA:
                self._data(flags, stream_id, payload, events)
            elif kind == HEADERS:
                self._headers(flags, stream_id, payload, events)
            elif kind == WINDOW_UPDATE:
                self._window_update(stream_id, payload, events)
            elif kind == SETTINGS:
                self._settings(flags, stream_id, payload, events)
            elif kind == PING:
                self._ping(flags, stream_id, payload, events)
            elif kind == RST_STREAM:
                self._rst_stream(stream_id, payload, events)
            elif kind == GOAWAY:
                self._goaway(stream_id, payload, events)
            elif kind == CONTINUATION:
                self._continuation(flags, stream_id, payload, events)
            elif kind == PRIORITY:
                self._priority(stream_id, payload)
            elif kind == PUSH_PROMISE:
                raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE, which we disabled")
            # Frames of unknown types are ignored (RFC 9113 §4.1).
        except _StreamError as exc:
            if self._streams.pop(stream_id, None) is not None:
                events.append(StreamReset(stream_id, exc.error_code))
            self._out += rst_stream_frame(stream_id, exc.error_code)

    def _idle(self, stream_id: int) -> bool:
        """A stream id neither side has used yet (a frame on one is a connection error)."""
        if stream_id % 2 == (1 if self.client_side else 0):  # ours
            return stream_id >= self._next_stream_id
        return stream_id > self.highest_inbound_stream_id

    def _data(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id == 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        flow = len(payload)
        self._connection_recv -= flow
        if self._connection_recv < 0:
            raise ConnectionFailed(ErrorCode.FLOW_CONTROL_ERROR, "DATA past the connection's window")
        self._acknowledge_connection(flow)
        data = _unpad(flags, payload)
        stream = self._streams.get(stream_id)
        if stream is None:
            if self._idle(stream_id):
                raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
            raise _StreamError(ErrorCode.STREAM_CLOSED)
        if stream.remote_closed or not stream.headers_done:
            raise _StreamError(ErrorCode.STREAM_CLOSED if stream.remote_closed else ErrorCode.PROTOCOL_ERROR)
        end_stream = bool(flags & FLAG_END_STREAM)
        if end_stream:
            self._end_remote(stream_id, stream)
        else:
            stream.recv_unacked += flow
            if stream.recv_unacked > self._receive_window:
                raise _StreamError(ErrorCode.FLOW_CONTROL_ERROR)
            if stream.recv_unacked >= self._receive_window // 2:
                self._out += window_update_frame(stream_id, stream.recv_unacked)
                stream.recv_unacked = 0
        events.append(DataReceived(stream_id, data, end_stream))

    def _acknowledge_connection(self, flow: int) -> None:
        """Give back connection window for what we read (we consume DATA as it comes), in steps of
        half the window so that a stream of small frames does not cost an update each."""
        self._connection_unacked += flow
        if self._connection_unacked >= self._receive_window // 2:
            self._out += window_update_frame(0, self._connection_unacked)
            self._connection_recv += self._connection_unacked
            self._connection_unacked = 0

    def _end_remote(self, stream_id: int, stream: _Stream) -> None:
        stream.remote_closed = True
        if stream.local_closed:
            del self._streams[stream_id]

    def _headers(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id == 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "HEADERS on stream 0")
        block = _unpad(flags, payload)
        if flags & FLAG_PRIORITY:
            if len(block) < 5:
                raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            block = block[5:]
        if flags & FLAG_END_HEADERS:
            self._header_block(flags, stream_id, block, events)
        else:
            self._block = bytearray(block)
            self._block_stream = stream_id
            self._block_flags = flags
            self._check_block_size()

    def _continuation(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if self._block is None:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without HEADERS")
        self._block += payload
        self._check_block_size()
        if flags & FLAG_END_HEADERS:
            block, self._block = bytes(self._block), None
            self._header_block(self._block_flags, stream_id, block, events)

    def _check_block_size(self) -> None:
        if self._block is not None and len(self._block) > MAX_HEADER_BLOCK_BYTES:
            raise ConnectionFailed(ErrorCode.ENHANCE_YOUR_CALM, "a header block over 64 KiB")

    def _header_block(self, flags: int, stream_id: int, block: bytes, events: list[Event]) -> None:
        """A whole header block: decoded always (the decoder's table must follow the peer's), then
        taken as a new stream, or as trailers, or refused."""
        try:
            fields = self._decode(block)
        except hpack.exceptions.OversizedHeaderListError as exc:
            raise ConnectionFailed(ErrorCode.ENHANCE_YOUR_CALM, f"header list too large: {exc}") from exc
        except (hpack.exceptions.HPACKError, ValueError, IndexError) as exc:
            raise ConnectionFailed(ErrorCode.COMPRESSION_ERROR, f"undecodable header block: {exc}") from exc
        end_stream = bool(flags & FLAG_END_STREAM)
        stream = self._streams.get(stream_id)
        if stream is None:
            if self.client_side or not self._idle(stream_id):
                if self._idle(stream_id):
                    raise ConnectionFailed(
                        ErrorCode.PROTOCOL_ERROR, f"HEADERS on unopened stream {stream_id}"
                    )
                raise _StreamError(ErrorCode.STREAM_CLOSED)
            self._open_inbound(stream_id, fields, end_stream, events)
            return
        if stream.remote_closed:
            raise _StreamError(ErrorCode.STREAM_CLOSED)
        if stream.headers_done:  # trailers: they end the stream and carry no pseudo-fields
            if not end_stream or any(name.startswith(b":") for name, _ in fields):
                raise _StreamError(ErrorCode.PROTOCOL_ERROR)
        elif self.client_side and not any(name == b":status" for name, _ in fields):
            raise _StreamError(ErrorCode.PROTOCOL_ERROR)
        stream.headers_done = True
        if end_stream:
            self._end_remote(stream_id, stream)
        events.append(HeadersReceived(stream_id, fields, end_stream))

    def _decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        """The fields of ``block``, from :attr:`_indexed_blocks` when it holds only one-byte indexed
        fields: such a block changes no table, so the same bytes mean the same fields until a block
        that may change the table comes (then the record starts over). A client that repeats its
        headers (kubelet, grpcio without a deadline) sends exactly such blocks after its first call,
        and their decoding was most of reading a request."""
        indexed_only = block and not block.translate(None, _ONE_BYTE_INDEXED)
        if indexed_only:
            known = self._indexed_blocks.get(block)
            if known is not None:
                return known
        fields = cast("list[tuple[bytes, bytes]]", self._decoder.decode(block, raw=True))
        if not indexed_only or len(self._indexed_blocks) >= INDEXED_BLOCKS_KEPT:
            self._indexed_blocks.clear()
        if indexed_only:
            self._indexed_blocks[block] = fields
        return fields

    def _open_inbound(
        self, stream_id: int, fields: list[tuple[bytes, bytes]], end_stream: bool, events: list[Event]
    ) -> None:
        if stream_id % 2 == 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, f"a client opened even stream {stream_id}")
        self.highest_inbound_stream_id = stream_id
        if len(self._streams) >= self._max_streams:
            raise _StreamError(ErrorCode.REFUSED_STREAM)
        if fields is not self._valid_fields:  # the same decoded block as last time: valid then
            if not _valid_request(fields):
                raise _StreamError(ErrorCode.PROTOCOL_ERROR)
            self._valid_fields = fields
        stream = _Stream(self._peer_initial_window)
        stream.headers_done = True
        stream.remote_closed = end_stream
        self._streams[stream_id] = stream
        events.append(HeadersReceived(stream_id, fields, end_stream))

    def _window_update(self, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if len(payload) != 4:
            raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong size")
        increment = int.from_bytes(payload, "big") & STREAM_ID_MASK
        if stream_id == 0:
            if increment == 0:
                raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "a zero connection window update")
            self.connection_send_window += increment
            if self.connection_send_window > MAX_WINDOW:
                raise ConnectionFailed(ErrorCode.FLOW_CONTROL_ERROR, "connection window past 2^31-1")
        else:
            stream = self._streams.get(stream_id)
            if stream is None:
                if self._idle(stream_id):
                    raise ConnectionFailed(
                        ErrorCode.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}"
                    )
                return  # a closed stream's: late, harmless
            if increment == 0:
                raise _StreamError(ErrorCode.PROTOCOL_ERROR)
            stream.send_window += increment
            if stream.send_window > MAX_WINDOW:
                raise _StreamError(ErrorCode.FLOW_CONTROL_ERROR)
        events.append(_WINDOW_OPENED)

    def _settings(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id != 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & FLAG_ACK:
            if payload:
                raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload")
            return
        if len(payload) % 6:
            raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes")
        initial_window = self._peer_initial_window
        for offset in range(0, len(payload), 6):
            key = int.from_bytes(payload[offset : offset + 2], "big")
            value = int.from_bytes(payload[offset + 2 : offset + 6], "big")
            self._setting(key, value)
        self._settings_seen = True
        self._out += frame_bytes(SETTINGS, FLAG_ACK, 0)
        if self._peer_initial_window > initial_window:
            # Every stream's window grew (RFC 9113 §6.9.2) with no WINDOW_UPDATE: grpc-go's BDP
            # estimate raises windows this way, and a sender waiting for window must hear of it.
            events.append(_WINDOW_OPENED)
        events.append(SettingsReceived())

    def _setting(self, key: int, value: int) -> None:
        if key == Setting.HEADER_TABLE_SIZE:
            # We never index (frames.encode_fields), so our table is empty; a smaller limit is still
            # acknowledged with a size update leading our next block, as RFC 7541 §4.2 asks.
            if value < 4096:
                self._table_size_update = value
        elif key == Setting.ENABLE_PUSH:
            if value > 1 or (self.client_side and value == 1):
                raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
        elif key == Setting.INITIAL_WINDOW_SIZE:
            if value > MAX_WINDOW:
                raise ConnectionFailed(ErrorCode.FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value}")
            delta = value - self._peer_initial_window
            self._peer_initial_window = value
            for stream in self._streams.values():
                stream.send_window += delta
                if stream.send_window > MAX_WINDOW:
                    raise ConnectionFailed(ErrorCode.FLOW_CONTROL_ERROR, "a stream window past 2^31-1")
        elif key == Setting.MAX_FRAME_SIZE:
            if not DEFAULT_MAX_FRAME_SIZE <= value <= LARGEST_MAX_FRAME_SIZE:
                raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
            self.max_outbound_frame_size = value
        # MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE bound what we send: one call per
        # connection from our client, a few small fields per block from either side.

    def _ping(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id != 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "PING not 8 bytes")
        if flags & FLAG_ACK:
            events.append(PingAcknowledged(payload))
        else:
            self._out += frame_bytes(PING, FLAG_ACK, 0, payload)

    def _rst_stream(self, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id == 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes")
        if self._idle(stream_id):
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
        if self._streams.pop(stream_id, None) is not None:
            events.append(StreamReset(stream_id, int.from_bytes(payload, "big")))

    def _goaway(self, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id != 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise ConnectionFailed(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")
        last = int.from_bytes(payload[:4], "big") & STREAM_ID_MASK
        events.append(GoAwayReceived(last, int.from_bytes(payload[4:8], "big")))

    def _priority(self, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0")
        if len(payload) != 5 and not self._idle(stream_id):  # a reset of an idle stream is itself
            raise _StreamError(ErrorCode.FRAME_SIZE_ERROR)  # an error (§5.1): a bad one there is dropped


def _unpad(flags: int, payload: bytes) -> bytes:
    if not flags & FLAG_PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ConnectionFailed(ErrorCode.PROTOCOL_ERROR, "padding as long as the frame")
    return payload[1 : len(payload) - payload[0]]


def _valid_request(fields: list[tuple[bytes, bytes]]) -> bool:
    """RFC 9113 §8.2-8.3 for a request's header block: names of lowercase token characters, known
    pseudo-fields first and once each (:method, :scheme and a non-empty :path present), no
    connection-specific field, ``te`` only ``trailers``, values without NUL/CR/LF or whitespace
    at either end."""
    seen: set[bytes] = set()
    regular = False
    for name, value in fields:
        if not _FIELD_NAME.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            return False
        if name[0] == 0x3A:  # ':'
            if regular or name not in _REQUEST_PSEUDO or name in seen:
                return False
            seen.add(name)
            if name == b":path" and not value:
                return False
        else:
            regular = True
            if name in _CONNECTION_SPECIFIC or (name == b"te" and value != b"trailers"):
                return False
    return {b":method", b":scheme", b":path"} <= seen
