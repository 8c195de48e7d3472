"""Refusing an overlong HTTP/2 frame at its header, before its body is buffered.

``h2`` checks a frame's length against SETTINGS_MAX_FRAME_SIZE only once the whole frame has
arrived, so a client announcing a 16 MiB frame (the 24-bit maximum) makes it buffer 16 MiB per
connection before the error. This tracks frame boundaries in the bytes as they come (a 9-byte
header, then the body it announces) and says so at the header.
"""

from __future__ import annotations

import h2.exceptions

FRAME_HEADER_BYTES = 9
CLIENT_PREFACE_BYTES = 24
"""``PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n``, which comes before the first frame (h2 checks its bytes)."""


class FrameLengthGuard:
    """Follows the frames of one direction of a connection; raises on a frame over ``limit`` bytes."""

    def __init__(self, limit: int, skip: int = CLIENT_PREFACE_BYTES) -> None:
        self._limit = limit
        self._skip = skip
        self._header = bytearray()

    def check(self, data: bytes) -> None:
        """Account for ``data``; FrameTooLargeError at a header that announces over the limit."""
        position, size = 0, len(data)
        while position < size:
            if self._skip:
                step = min(self._skip, size - position)
                self._skip -= step
                position += step
                continue
            step = min(FRAME_HEADER_BYTES - len(self._header), size - position)
            self._header += data[position : position + step]
            position += step
            if len(self._header) == FRAME_HEADER_BYTES:
                length = int.from_bytes(self._header[:3], "big")
                if length > self._limit:
                    raise h2.exceptions.FrameTooLargeError(
                        f"frame of {length} bytes announced; the limit is {self._limit}"
                    )
                self._skip = length
                self._header.clear()
