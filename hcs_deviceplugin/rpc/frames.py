"""HTTP/2 as bytes: frame layout (RFC 9113 §4.1, §6), error codes, settings, and header blocks we send.

Header blocks we send are HPACK (RFC 7541) that never touches the dynamic table: static-table
entries where one matches, literals "without indexing" otherwise. Such a block means the same
whatever the connection's state, so the constant ones (our response headers, an OK status) are
built once for the life of the process, and sending needs no HPACK encoder at all. Blocks we
receive still need a decoder (peers index and Huffman-code freely): that is ``hpack``'s.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable

FRAME_HEADER_BYTES = 9
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""What a client sends before its first frame (RFC 9113 §3.4)."""

DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9

FLAG_END_STREAM = 0x1
FLAG_ACK = 0x1
FLAG_END_HEADERS = 0x4
FLAG_PADDED = 0x8
FLAG_PRIORITY = 0x20

DEFAULT_WINDOW = 65_535
MAX_WINDOW = 2**31 - 1
DEFAULT_MAX_FRAME_SIZE = 16_384
LARGEST_MAX_FRAME_SIZE = 2**24 - 1
STREAM_ID_MASK = 0x7FFF_FFFF


class ErrorCode(enum.IntEnum):
    """RFC 9113 §7."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


def error_name(code: int) -> str:
    """``code``'s name, or its number for a code RFC 9113 does not define."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Setting(enum.IntEnum):
    """RFC 9113 §6.5.2."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


_HEADER = struct.Struct(">HBBBL")
"""A frame header: the 24-bit length as 16 + 8 bits, type, flags, stream id."""


def frame_bytes(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One whole frame."""
    length = len(payload)
    return _HEADER.pack(length >> 8, length & 0xFF, kind, flags, stream_id) + payload


def read_frame_header(buffer: bytes | bytearray, offset: int) -> tuple[int, int, int, int]:
    """(length, type, flags, stream id) of the frame header at ``offset`` (9 bytes must be there)."""
    high, low, kind, flags, stream_id = _HEADER.unpack_from(buffer, offset)
    return (high << 8) | low, kind, flags, stream_id & STREAM_ID_MASK


def settings_frame(settings: Iterable[tuple[int, int]]) -> bytes:
    return frame_bytes(SETTINGS, 0, 0, b"".join(struct.pack(">HL", key, value) for key, value in settings))


def window_update_frame(stream_id: int, increment: int) -> bytes:
    return frame_bytes(WINDOW_UPDATE, 0, stream_id, increment.to_bytes(4, "big"))


def rst_stream_frame(stream_id: int, error_code: int) -> bytes:
    return frame_bytes(RST_STREAM, 0, stream_id, error_code.to_bytes(4, "big"))


def goaway_frame(last_stream_id: int, error_code: int, debug: bytes = b"") -> bytes:
    return frame_bytes(GOAWAY, 0, 0, struct.pack(">LL", last_stream_id, error_code) + debug)


# -- header blocks we send ----------------------------------------------------------------------

_STATIC_FIELDS = {
    (b":method", b"GET"): 2,
    (b":method", b"POST"): 3,
    (b":path", b"/"): 4,
    (b":scheme", b"http"): 6,
    (b":scheme", b"https"): 7,
    (b":status", b"200"): 8,
    (b":status", b"204"): 9,
    (b":status", b"400"): 12,
    (b":status", b"404"): 13,
    (b":status", b"500"): 14,
}
"""RFC 7541 Appendix A entries sent as one byte (an indexed field changes no table)."""
_STATIC_NAMES = {
    b":authority": 1,
    b":method": 2,
    b":path": 4,
    b":scheme": 6,
    b":status": 8,
    b"content-type": 31,
    b"user-agent": 58,
}
"""Static-table names whose literals are sent by index."""


def _integer(value: int, prefix_bits: int, first: int) -> bytes:
    """RFC 7541 §5.1: ``value`` in a ``prefix_bits``-bit prefix whose other bits are ``first``."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_fields(fields: Iterable[tuple[bytes, bytes]], table_size: int | None = None) -> bytes:
    """A header block for ``fields`` that leaves every dynamic table as it is.

    ``table_size``, when given, starts the block with a dynamic table size update (RFC 7541 §6.3),
    which a block must carry after the peer lowered SETTINGS_HEADER_TABLE_SIZE.
    """
    out = bytearray() if table_size is None else bytearray(_integer(table_size, 5, 0x20))
    for name, value in fields:
        index = _STATIC_FIELDS.get((name, value))
        if index is not None:
            out.append(0x80 | index)
            continue
        name_index = _STATIC_NAMES.get(name)
        if name_index is not None:
            out += _integer(name_index, 4, 0x00)
        else:
            out.append(0x00)
            out += _integer(len(name), 7, 0x00)
            out += name
        out += _integer(len(value), 7, 0x00)
        out += value
    return bytes(out)
