"""The gRPC-over-HTTP/2 encoding of messages and statuses (the "PROTOCOL-HTTP2" document of gRPC).

Every message travels as a 5-byte prefix (a compressed flag, then the length, big-endian) and its
bytes, and may be split across DATA frames in any way; a status travels in trailers as
``grpc-status`` and a percent-encoded ``grpc-message``.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from hcs_deviceplugin.rpc.status import Code

PREFIX_BYTES = 5
CONTENT_TYPE = b"application/grpc"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Largest message either side accepts, as the plugin server's grpcio options said before."""

# RFC 3986 unreserved plus the printable characters the gRPC spec leaves as they are (all of
# 0x20-0x7E except '%'), so messages stay readable on the wire.
_KEEP = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


def frame(message: bytes) -> bytes:
    """``message`` with its uncompressed-message prefix."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


class MessageTooLarge(ValueError):
    """A peer announced a message over the limit."""


class CompressedMessage(ValueError):
    """A peer sent a compressed message, which this end never offers to accept."""


class MessageReader:
    """Reassembles length-prefixed messages from DATA chunks as they arrive."""

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._buffer = bytearray()
        self._limit = limit

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk; the messages it completed, in order."""
        self._buffer += chunk
        messages: list[bytes] = []
        while len(self._buffer) >= PREFIX_BYTES:
            if self._buffer[0] != 0:
                raise CompressedMessage("compressed gRPC message (no compression was negotiated)")
            size = int.from_bytes(self._buffer[1:PREFIX_BYTES], "big")
            if size > self._limit:
                raise MessageTooLarge(f"message of {size} bytes is over the {self._limit}-byte limit")
            end = PREFIX_BYTES + size
            if len(self._buffer) < end:
                break
            messages.append(bytes(self._buffer[PREFIX_BYTES:end]))
            del self._buffer[:end]
        return messages

    @property
    def partial(self) -> bool:
        """Bytes of an unfinished message are waiting (a stream that ends here was cut short)."""
        return bool(self._buffer)


MAX_DETAILS_BYTES = 4096
"""Longest ``grpc-message`` we send: grpcio refuses a call whose trailers pass 8 KiB (its default
metadata limit), so a handler's long exception text is cut rather than cost the client the status."""


def encode_message(details: str, limit: int = MAX_DETAILS_BYTES) -> bytes:
    """``grpc-message``: the details percent-encoded as UTF-8, cut to ``limit`` bytes.

    Any string encodes: what UTF-8 cannot carry (a lone surrogate, as undecodable bytes leave in
    an exception's text) becomes '?'. A cut never splits a character or an escape.
    """
    encoded = _quote(details)
    if len(encoded) > limit:
        pieces, size = [], 0
        for character in details[:limit]:  # every character takes at least a byte
            piece = _quote(character)
            size += len(piece)
            if size > limit:
                break
            pieces.append(piece)
        encoded = "".join(pieces)
    return encoded.encode("ascii")


def _quote(text: str) -> str:
    return quote(text, safe=_KEEP, encoding="utf-8", errors="replace")


def decode_message(raw: bytes) -> str:
    """The details of a ``grpc-message`` (a malformed escape is kept as it came)."""
    return unquote(raw.decode("ascii", "replace"), encoding="utf-8", errors="replace")


def status_headers(code: Code, details: str) -> list[tuple[bytes, bytes]]:
    """The trailer fields of a status."""
    fields = [(b"grpc-status", str(int(code)).encode("ascii"))]
    if details:
        fields.append((b"grpc-message", encode_message(details)))
    return fields


def status_of(headers: dict[bytes, bytes]) -> tuple[Code, str] | None:
    """The status in a header or trailer block, or None if it has none."""
    raw = headers.get(b"grpc-status")
    if raw is None:
        return None
    try:
        code = Code.of(int(raw))
    except ValueError:
        return Code.UNKNOWN, f"malformed grpc-status {raw!r}"
    return code, decode_message(headers.get(b"grpc-message", b""))


def timeout_header(seconds: float) -> bytes:
    """``grpc-timeout`` for ``seconds`` (at most 8 digits, in the coarsest unit that still fits)."""
    millis = max(int(seconds * 1000), 1)
    if millis < 100_000_000:
        return f"{millis}m".encode("ascii")
    return f"{min(int(seconds), 99_999_999)}S".encode("ascii")


_RESET_CODES = {
    0x7: Code.UNAVAILABLE,  # REFUSED_STREAM: not processed, safe to retry
    0x8: Code.CANCELLED,  # CANCEL
    0xB: Code.RESOURCE_EXHAUSTED,  # ENHANCE_YOUR_CALM
    0xC: Code.PERMISSION_DENIED,  # INADEQUATE_SECURITY
}


def code_of_reset(error_code: int) -> Code:
    """The status of a call its peer reset with ``error_code`` (the table of PROTOCOL-HTTP2's
    "Errors"; every code it does not name, NO_ERROR among them, is INTERNAL)."""
    return _RESET_CODES.get(error_code, Code.INTERNAL)


_HTTP_CODES = {
    400: Code.INTERNAL,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.UNIMPLEMENTED,
    429: Code.UNAVAILABLE,
    502: Code.UNAVAILABLE,
    503: Code.UNAVAILABLE,
    504: Code.UNAVAILABLE,
}


def code_of_http_status(status: bytes) -> Code:
    """The status of an answer with HTTP ``status`` and no ``grpc-status`` (gRPC's
    http-grpc-status-mapping: what an intermediary or a non-gRPC server most likely meant)."""
    try:
        return _HTTP_CODES.get(int(status), Code.UNKNOWN)
    except ValueError:
        return Code.UNKNOWN
