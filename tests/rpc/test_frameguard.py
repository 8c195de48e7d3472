"""Frame boundaries followed across any chunking, and an overlong frame caught at its header."""

from __future__ import annotations

import itertools

import h2.exceptions
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.rpc.frameguard import (
    CLIENT_PREFACE_BYTES,
    FrameLengthGuard,
    FrameSplitter,
    GoAway,
    goaway_of,
)

LIMIT = 16384
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame_bytes(length: int) -> bytes:
    """A DATA frame with a body of ``length`` bytes (0xff, to look like lengths if misread)."""
    return length.to_bytes(3, "big") + b"\x00\x00\x00\x00\x00\x01" + b"\xff" * length


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@pytest.mark.parametrize(
    ("stream", "refused"),
    [
        pytest.param(PREFACE, False, id="preface-only"),
        pytest.param(PREFACE + frame_bytes(0), False, id="empty-frame"),
        pytest.param(PREFACE + frame_bytes(LIMIT), False, id="frame-at-limit"),
        pytest.param(PREFACE + frame_bytes(LIMIT + 1), True, id="frame-over-limit"),
        pytest.param(PREFACE + frame_bytes(5) + frame_bytes(LIMIT + 1)[:9], True, id="second-header-over"),
        pytest.param(PREFACE + b"\xff\xff\xff", False, id="partial-header"),
        pytest.param(b"\xff" * CLIENT_PREFACE_BYTES, False, id="preface-bytes-not-read-as-a-header"),
    ],
)
def test_frame_lengths(stream: bytes, refused: bool) -> None:
    guard = FrameLengthGuard(LIMIT)
    if refused:
        with pytest.raises(h2.exceptions.FrameTooLargeError):
            guard.check(stream)
    else:
        guard.check(stream)


@given(
    lengths=st.lists(st.integers(0, LIMIT), max_size=6),
    cuts=st.lists(st.integers(0, 10**6), max_size=20),
    oversized=st.integers(LIMIT + 1, 2**24 - 1),
)
def test_any_chunking_passes_valid_frames_and_stops_at_the_overlong_header(
    lengths: list[int], cuts: list[int], oversized: int
) -> None:
    valid = PREFACE + b"".join(frame_bytes(n) for n in lengths)
    guard = FrameLengthGuard(LIMIT)
    for chunk in chunked(valid, cuts):
        guard.check(chunk)
    header = oversized.to_bytes(3, "big") + b"\x00" * 6
    with pytest.raises(h2.exceptions.FrameTooLargeError):
        for chunk in chunked(header + b"x" * 10, cuts):
            guard.check(chunk)


def goaway_bytes(last: int, error: int) -> bytes:
    return b"\x00\x00\x08\x07\x00\x00\x00\x00\x00" + last.to_bytes(4, "big") + error.to_bytes(4, "big")


@pytest.mark.parametrize(
    ("frame", "goaway"),
    [
        pytest.param(goaway_bytes(5, 0), GoAway(5, 0), id="graceful"),
        pytest.param(goaway_bytes(2**31 - 1, 2), GoAway(2**31 - 1, 2), id="largest-id-internal-error"),
        pytest.param(goaway_bytes(0x8000_0003, 0), GoAway(3, 0), id="reserved-bit-ignored"),
        pytest.param(goaway_bytes(1, 0) + b"debug data", GoAway(1, 0), id="with-debug-data"),
        pytest.param(frame_bytes(8), None, id="data-frame"),
        pytest.param(goaway_bytes(1, 0)[:12], None, id="short"),
    ],
)
def test_goaway_of(frame: bytes, goaway: GoAway | None) -> None:
    assert goaway_of(frame) == goaway


@given(lengths=st.lists(st.integers(0, 300), max_size=6), cuts=st.lists(st.integers(0, 10**6), max_size=20))
def test_splitter_returns_the_frames_whole_for_any_chunking(lengths: list[int], cuts: list[int]) -> None:
    frames = [frame_bytes(n) for n in lengths]
    splitter = FrameSplitter(LIMIT)
    got = [f for chunk in chunked(b"".join(frames), cuts) for f in splitter.feed(chunk)]
    assert got == frames


def test_splitter_refuses_an_overlong_frame_at_its_header() -> None:
    with pytest.raises(h2.exceptions.FrameTooLargeError):
        FrameSplitter(LIMIT).feed(frame_bytes(LIMIT + 1)[:9])
