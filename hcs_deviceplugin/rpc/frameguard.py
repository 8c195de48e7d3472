"""HTTP/2 frame boundaries in the bytes as they come, for what ``h2`` does not do itself.

- ``h2`` checks a frame's length against SETTINGS_MAX_FRAME_SIZE only once the whole frame has
  arrived, so a client announcing a 16 MiB frame (the 24-bit maximum) makes it buffer 16 MiB per
  connection before the error. :class:`ClientFrames` says so at the header.
- ``h2`` treats a connection as closed from a GOAWAY frame on, either way, and refuses the frames
  after it in the same read: answers a graceful GOAWAY still promises (RFC 9113 §6.8). So GOAWAYs
  are taken out before h2 sees them: :class:`ClientFrames` on the server, :class:`FrameSplitter`
  (whole frames) on the client.
"""

from __future__ import annotations

from dataclasses import dataclass

import h2.exceptions

FRAME_HEADER_BYTES = 9
CLIENT_PREFACE_BYTES = 24
"""``PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n``, which comes before the first frame (h2 checks its bytes)."""


GOAWAY = 0x7


@dataclass(frozen=True)
class GoAway:
    """A GOAWAY frame's content: the last stream the sender will still answer, and why it goes."""

    last_stream_id: int
    error_code: int


class ClientFrames:
    """Follows the frames a client sends: refuses an overlong one at its header, and takes GOAWAY
    frames out of the bytes (returned on their own) so that h2 keeps serving the calls in flight.

    ``feed`` returns the bytes for h2 and the GOAWAYs completed; a frame header is passed on only
    once whole, since its type decides where the frame goes.
    """

    def __init__(self, limit: int, skip: int = CLIENT_PREFACE_BYTES) -> None:
        self._limit = limit
        self._skip = skip
        """Bytes still to pass on unread: the preface, then each frame's body."""
        self._header = bytearray()
        self._goaway = bytearray()
        self._goaway_left = 0

    def feed(self, data: bytes) -> tuple[bytes, list[GoAway]]:
        """Account for ``data``; FrameTooLargeError at a header over the limit, ProtocolError for a
        malformed GOAWAY."""
        passed = bytearray()
        goaways: list[GoAway] = []
        position, size = 0, len(data)
        while position < size:
            if self._skip:
                step = min(self._skip, size - position)
                passed += data[position : position + step]
                self._skip -= step
                position += step
            elif self._goaway_left:
                step = min(self._goaway_left, size - position)
                self._goaway += data[position : position + step]
                self._goaway_left -= step
                position += step
                if not self._goaway_left:
                    goaways.append(_goaway_body(self._goaway))
                    self._goaway.clear()
            else:
                step = min(FRAME_HEADER_BYTES - len(self._header), size - position)
                self._header += data[position : position + step]
                position += step
                if len(self._header) == FRAME_HEADER_BYTES:
                    self._route_header(passed)
        return bytes(passed), goaways

    def _route_header(self, passed: bytearray) -> None:
        length = int.from_bytes(self._header[:3], "big")
        if length > self._limit:
            raise h2.exceptions.FrameTooLargeError(
                f"frame of {length} bytes announced; the limit is {self._limit}"
            )
        if self._header[3] == GOAWAY:
            if length < 8 or int.from_bytes(self._header[5:9], "big") & 0x7FFF_FFFF:
                raise h2.exceptions.ProtocolError("malformed GOAWAY frame")
            self._goaway_left = length
        else:
            passed += self._header
            self._skip = length
        self._header.clear()


def goaway_of(frame: bytes) -> GoAway | None:
    """The GOAWAY ``frame`` (a whole frame, header included) is, or None for any other frame."""
    if len(frame) < FRAME_HEADER_BYTES + 8 or frame[3] != GOAWAY:
        return None
    return _goaway_body(frame[FRAME_HEADER_BYTES:])


def _goaway_body(body: bytes | bytearray) -> GoAway:
    return GoAway(int.from_bytes(body[:4], "big") & 0x7FFF_FFFF, int.from_bytes(body[4:8], "big"))


class FrameSplitter:
    """Whole frames out of the bytes a server sends (it sends no preface), at most ``limit`` long."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; the frames it completed, in order (FrameTooLargeError for an overlong one)."""
        self._buffer += data
        frames: list[bytes] = []
        while len(self._buffer) >= FRAME_HEADER_BYTES:
            length = int.from_bytes(self._buffer[:3], "big")
            if length > self._limit:
                raise h2.exceptions.FrameTooLargeError(f"frame of {length} bytes; the limit is {self._limit}")
            end = FRAME_HEADER_BYTES + length
            if len(self._buffer) < end:
                break
            frames.append(bytes(self._buffer[:end]))
            del self._buffer[:end]
        return frames
