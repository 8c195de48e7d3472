"""The protobuf wire format, as much of it as the generated ``*_wire.py`` codecs need.

The daemon speaks protobuf without the ``protobuf`` package: importing its runtime and the ``*_pb2``
modules cost a large share of every start, and building and parsing messages through upb objects
cost more than the Allocate answer itself. The codecs that ``regenerate`` writes from the .proto
files call these helpers, so the format's rules live here once: varints (two's complement, ten
bytes, for negative ints), lengths checked against the end of the enclosing message, unknown fields
skipped by their wire type, and a :class:`DecodeError` (a ``ValueError``) for anything malformed,
never an ``IndexError`` or a loop that does not end.

A known field number that arrives with another wire type is skipped as an unknown field, as
protobuf does. Groups (wire types 3 and 4) are refused, where protobuf would skip them: no proto3
message has them, so on our APIs they can only be damage.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK64 = (1 << 64) - 1
MAX_TAG = (1 << 32) - 1
"""The largest tag: field number 2^29 - 1 with wire type 7."""
INT32 = (-(1 << 31), 1 << 31)
INT64 = (-(1 << 63), 1 << 63)
UINT32 = (0, 1 << 32)
UINT64 = (0, 1 << 64)
BOOL = (0, 2)

VARINT = 0
FIXED64 = 1
LENGTH = 2
FIXED32 = 5


class DecodeError(ValueError):
    """Bytes that are not an encoding of the message asked for (truncated, malformed)."""


class EncodeError(ValueError):
    """A field value the wire format cannot carry (an int out of its type's range, a lone surrogate)."""


# -- reading -----------------------------------------------------------------------------------


def read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (at most ten bytes, kept to 64 bits) and the position after it."""
    if pos >= end:
        raise DecodeError(f"truncated varint at byte {pos}")
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise DecodeError(f"truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & MASK64, pos
        shift += 7
        if shift >= 70:
            raise DecodeError(f"varint longer than ten bytes ending at byte {pos}")


def read_tag(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A field's tag (number << 3 | wire type) and the position after it; field number 0 is refused."""
    tag, pos = read_varint(data, pos, end)
    if tag > MAX_TAG or tag < 8:
        raise DecodeError(f"invalid field tag {tag} before byte {pos}")
    return tag, pos


def read_length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The span ``(start, stop)`` of the length-delimited value at ``pos``, checked against ``end``."""
    if pos < end and data[pos] < 0x80:
        size, start = data[pos], pos + 1
    else:
        size, start = read_varint(data, pos, end)
    stop = start + size
    if stop > end:
        raise DecodeError(f"length {size} at byte {pos} runs past the end of the message")
    return start, stop


def read_string(data: bytes, pos: int, end: int) -> tuple[str, int]:
    """A UTF-8 string field's value; invalid UTF-8 is an error, as upb makes it."""
    if pos < end and data[pos] < 0x80:  # a length under 128, in one byte: the common case
        start = pos + 1
        stop = start + data[pos]
        if stop > end:
            raise DecodeError(f"length {data[pos]} at byte {pos} runs past the end of the message")
    else:
        start, stop = read_length(data, pos, end)
    try:
        return data[start:stop].decode("utf-8"), stop
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string field at byte {pos} is not valid UTF-8: {exc.reason}") from exc


def read_strings(data: bytes, pos: int, end: int, tag: int, out: list[str]) -> int:
    """A repeated string field's value at ``pos`` and every one right behind it under the same
    one-byte ``tag`` (how every encoder writes a list), appended to ``out``; the position after.

    One call per run of ids instead of a pass through the message's tag dispatch per id: kubelet's
    GetPreferredAllocation on a 512-unit pool lists hundreds of them. Ids that share one length and
    are ASCII (a pool's ids usually all are) are cut out of one decoded slice per run; where the
    length changes (``gpu0::9``, ``gpu0::10``) one id is read alone and the next run begins. A run
    is looked for in a window of :data:`_RUN_WINDOW` ids that doubles while runs fill it, so ids
    that never repeat a length cost a bounded look each, never a look at the whole message.
    """
    append = out.append
    window = _RUN_WINDOW
    while True:
        before = len(out)
        pos, done = _equal_ascii_run(data, pos, end, tag, out, window)
        if done:
            return pos
        if len(out) - before == window:  # the run filled the window: it may well go on
            window *= 2
            continue
        window = _RUN_WINDOW
        text, pos = read_string(data, pos, end)
        append(text)
        if pos >= end or data[pos] != tag:
            return pos
        pos += 1


_RUN_WINDOW = 16
"""Ids :func:`read_strings` first looks at for a run of one length."""


def _equal_ascii_run(
    data: bytes, pos: int, end: int, tag: int, out: list[str], limit: int
) -> tuple[int, bool]:
    """Read the longest run of at most ``limit`` values at ``pos`` (its tag already read) that are
    ASCII, under a one-byte length below 128 and all as long as the first, into ``out``.

    Returns where the next value starts (its tag read) and False when nothing was read or more
    values of the field follow; the position after the field's values and True when they ended
    with the run. Tags and lengths are checked at every stride of the run with slices and the text
    decoded once, so the cost is a few C calls plus a slice per id; the window looked at is at
    most ``limit`` values.
    """
    if pos >= end or data[pos] >= 0x80:
        return pos, False
    size = data[pos]
    stride = size + 2
    start = pos - 1  # the first value's tag
    count = min((end - start) // stride, limit)
    if count < 2:
        return pos, False
    window = data[start : start + count * stride]
    count = min(
        count - len(window[0::stride].lstrip(bytes((tag,)))),
        count - len(window[1::stride].lstrip(bytes((size,)))),
    )
    run = window[: count * stride]
    if count < 2 or not run.isascii():
        return pos, False
    text = run.decode("ascii")
    out.extend([text[i : i + size] for i in range(2, 2 + count * stride, stride)])
    after = start + count * stride
    if after < end and data[after] == tag:
        return after + 1, False
    return after, True


def read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes, int]:
    start, stop = read_length(data, pos, end)
    return data[start:stop], stop


def as_int32(value: int) -> int:
    """The low 32 bits of a decoded varint as a signed int (int32 and enum fields)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def as_int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def as_uint32(value: int) -> int:
    return value & 0xFFFFFFFF


def read_packed(data: bytes, pos: int, end: int) -> tuple[list[int], int]:
    """The raw varints of a packed repeated field (convert each with ``as_*``)."""
    start, stop = read_length(data, pos, end)
    values: list[int] = []
    while start < stop:
        value, start = read_varint(data, start, stop)
        values.append(value)
    return values, stop


def skip_field(data: bytes, tag: int, pos: int, end: int) -> int:
    """The position after the value of a field we do not know (or know with another wire type).

    The generated decoders read a one-byte tag inline, so field number 0 is refused here too."""
    if tag < 8:
        raise DecodeError(f"invalid field tag {tag} before byte {pos}")
    wire_type = tag & 7
    if wire_type == VARINT:
        return read_varint(data, pos, end)[1]
    if wire_type == LENGTH:
        return read_length(data, pos, end)[1]
    if wire_type in (FIXED64, FIXED32):
        stop = pos + (8 if wire_type == FIXED64 else 4)
        if stop > end:
            raise DecodeError(f"truncated fixed-width field at byte {pos}")
        return stop
    if wire_type in (3, 4):
        raise DecodeError(f"group (wire type {wire_type}) of field {tag >> 3} at byte {pos}: not proto3")
    raise DecodeError(f"invalid wire type {wire_type} of field {tag >> 3} at byte {pos}")


# -- writing -----------------------------------------------------------------------------------


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2^64) as a varint."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def checked(value: int, bounds: tuple[int, int], kind: str) -> int:
    """``value`` as the unsigned 64 bits its varint carries, if it fits ``kind``'s ``bounds``."""
    low, high = bounds
    if not low <= value < high:
        raise EncodeError(f"{value} is out of range for {kind}")
    return value & MASK64


def put_string(out: bytearray, tag: bytes, value: str) -> None:
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodeError(f"string {value!r} is not encodable as UTF-8: {exc.reason}") from exc
    out += tag
    put_varint(out, len(encoded))
    out += encoded


def put_bytes(out: bytearray, tag: bytes, value: bytes) -> None:
    out += tag
    put_varint(out, len(value))
    out += value


def put_packed(out: bytearray, tag: bytes, values: Iterable[int], bounds: tuple[int, int], kind: str) -> None:
    """A packed repeated varint field (proto3's default encoding for repeated numbers)."""
    body = bytearray()
    for value in values:
        put_varint(body, checked(value, bounds, kind))
    out += tag
    put_varint(out, len(body))
    out += body


def put_int(out: bytearray, tag: bytes, value: int, bounds: tuple[int, int], kind: str) -> None:
    """A varint field: ``tag`` then ``value`` (a negative int as its 64-bit two's complement)."""
    out += tag
    put_varint(out, checked(value, bounds, kind))


# -- what every message class shares ----------------------------------------------------------


def same_fields(message: object, other: object) -> bool:
    """Equality of two generated messages: the same class and equal fields."""
    if type(message) is not type(other):
        return False
    return all(getattr(message, name) == getattr(other, name) for name in _slots(message))


def fields_repr(message: object) -> str:
    fields = ", ".join(f"{name}={getattr(message, name)!r}" for name in _slots(message))
    return f"{type(message).__name__}({fields})"


def _slots(message: object) -> tuple[str, ...]:
    """A generated class's fields: its own ``__slots__`` (generated classes inherit nothing)."""
    slots: tuple[str, ...] = vars(type(message))["__slots__"]
    return slots
