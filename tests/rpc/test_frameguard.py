"""Frame boundaries followed across any chunking: an overlong frame caught at its header, GOAWAYs taken
out of what h2 is fed, whole frames for the client."""

from __future__ import annotations

import itertools

import h2.exceptions
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.rpc.frameguard import (
    CLIENT_PREFACE_BYTES,
    ClientFrames,
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
    ("stream", "error"),
    [
        pytest.param(PREFACE, None, id="preface-only"),
        pytest.param(PREFACE + frame_bytes(0), None, id="empty-frame"),
        pytest.param(PREFACE + frame_bytes(LIMIT), None, id="frame-at-limit"),
        pytest.param(
            PREFACE + frame_bytes(LIMIT + 1), h2.exceptions.FrameTooLargeError, id="frame-over-limit"
        ),
        pytest.param(
            PREFACE + frame_bytes(5) + frame_bytes(LIMIT + 1)[:9],
            h2.exceptions.FrameTooLargeError,
            id="second-header-over",
        ),
        pytest.param(PREFACE + b"\xff\xff\xff", None, id="partial-header"),
        pytest.param(b"\xff" * CLIENT_PREFACE_BYTES, None, id="preface-bytes-not-read-as-a-header"),
        pytest.param(
            PREFACE + b"\x00\x00\x04\x07" + b"\x00" * 9, h2.exceptions.ProtocolError, id="short-goaway"
        ),
        pytest.param(
            PREFACE + b"\x00\x00\x08\x07\x00\x00\x00\x00\x01" + b"\x00" * 8,
            h2.exceptions.ProtocolError,
            id="goaway-on-a-stream",
        ),
    ],
)
def test_client_frames_refuse(stream: bytes, error: type[Exception] | None) -> None:
    frames = ClientFrames(LIMIT)
    if error is not None:
        with pytest.raises(error):
            frames.feed(stream)
    else:
        frames.feed(stream)


@given(
    lengths=st.lists(st.integers(0, LIMIT), max_size=6),
    goaway_at=st.lists(st.integers(0, 6), max_size=2),
    cuts=st.lists(st.integers(0, 10**6), max_size=20),
    oversized=st.integers(LIMIT + 1, 2**24 - 1),
)
def test_any_chunking_passes_frames_on_takes_goaways_out_and_stops_at_the_overlong_header(
    lengths: list[int], goaway_at: list[int], cuts: list[int], oversized: int
) -> None:
    frames = [frame_bytes(n) for n in lengths]
    wire = [*frames]
    for i, position in enumerate(sorted(goaway_at)):
        wire.insert(min(position + i, len(wire)), goaway_bytes(i + 1, 0))
    stream = PREFACE + b"".join(wire)
    client = ClientFrames(LIMIT)
    passed, goaways = b"", []
    for chunk in chunked(stream, cuts):
        more, found = client.feed(chunk)
        passed += more
        goaways += found
    assert passed == PREFACE + b"".join(frames)
    assert goaways == [GoAway(i + 1, 0) for i in range(len(goaway_at))]
    header = oversized.to_bytes(3, "big") + b"\x00" * 6
    with pytest.raises(h2.exceptions.FrameTooLargeError):
        for chunk in chunked(header + b"x" * 10, cuts):
            client.feed(chunk)


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
