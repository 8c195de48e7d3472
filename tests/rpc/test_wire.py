"""The wire encoding: message framing, grpc-message, grpc-status and grpc-timeout, by table and property."""

from __future__ import annotations

import itertools
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.rpc.status import Code
from hcs_deviceplugin.rpc.wire import (
    MAX_DETAILS_BYTES,
    CompressedMessage,
    MessageReader,
    MessageTooLarge,
    code_of_http_status,
    code_of_reset,
    decode_message,
    encode_message,
    frame,
    status_headers,
    status_of,
    timeout_header,
)


@pytest.mark.parametrize(
    ("message", "framed"),
    [
        pytest.param(b"", b"\x00\x00\x00\x00\x00", id="empty"),
        pytest.param(b"ab", b"\x00\x00\x00\x00\x02ab", id="short"),
        pytest.param(b"x" * 256, b"\x00\x00\x00\x01\x00" + b"x" * 256, id="length-byte-carry"),
    ],
)
def test_frame(message: bytes, framed: bytes) -> None:
    assert frame(message) == framed


@pytest.mark.parametrize(
    ("chunks", "messages", "partial"),
    [
        pytest.param([b""], [], False, id="nothing"),
        pytest.param([b"\x00\x00\x00"], [], True, id="half-a-prefix"),
        pytest.param([b"\x00\x00\x00\x00\x00"], [b""], False, id="empty-message"),
        pytest.param([b"\x00\x00\x00\x00\x03a", b"b", b"c"], [b"abc"], False, id="split-body"),
        pytest.param([b"\x00\x00\x00\x00\x01a\x00\x00\x00\x00\x01b"], [b"a", b"b"], False, id="two-in-one"),
        pytest.param([b"\x00\x00\x00\x00\x01a\x00\x00"], [b"a"], True, id="one-and-a-bit"),
    ],
)
def test_message_reader(chunks: list[bytes], messages: list[bytes], partial: bool) -> None:
    reader = MessageReader()
    got = [m for chunk in chunks for m in reader.feed(chunk)]
    assert (got, reader.partial) == (messages, partial)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(b"\x01\x00\x00\x00\x00", CompressedMessage, id="compressed"),
        pytest.param(b"\x00\x00\x00\x00\x0b", MessageTooLarge, id="over-the-limit-at-the-prefix"),
    ],
)
def test_message_reader_refuses(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        MessageReader(limit=10).feed(data)


def test_message_at_the_limit_is_taken() -> None:
    assert MessageReader(limit=10).feed(frame(b"x" * 10)) == [b"x" * 10]


@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(0, 10**5), max_size=30))
def test_framing_round_trips_for_any_chunking(messages: list[bytes], cuts: list[int]) -> None:
    wire = b"".join(frame(m) for m in messages)
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    reader = MessageReader()
    got = [m for a, b in itertools.pairwise(points) for m in reader.feed(wire[a:b])]
    assert got == messages
    assert not reader.partial


@pytest.mark.parametrize(
    ("details", "encoded"),
    [
        pytest.param("", b"", id="empty"),
        pytest.param("plain text: (ok) [1/2] ~!", b"plain text: (ok) [1/2] ~!", id="printable-kept"),
        pytest.param("100%", b"100%25", id="percent"),
        pytest.param("a\nb\tc", b"a%0Ab%09c", id="controls"),
        pytest.param("ü", b"%C3%BC", id="two-byte"),
        pytest.param("日", b"%E6%97%A5", id="three-byte"),
        pytest.param("\U0001f600", b"%F0%9F%98%80", id="four-byte"),
        pytest.param("\x7f", b"%7F", id="del"),
        pytest.param("bad \udcff", b"bad ?", id="lone-surrogate"),
    ],
)
def test_encode_message(details: str, encoded: bytes) -> None:
    assert encode_message(details) == encoded


@pytest.mark.parametrize(
    ("raw", "details"),
    [
        pytest.param(b"%C3%BC", "ü", id="utf8"),
        pytest.param(b"%c3%bc", "ü", id="lower-case-hex"),
        pytest.param(b"50%", "50%", id="dangling-percent"),
        pytest.param(b"%ZZ", "%ZZ", id="not-hex"),
        pytest.param(b"%FF", "\ufffd", id="not-utf8"),
        pytest.param(b"caf\xc3\xa9", "caf\ufffd\ufffd", id="raw-non-ascii"),
    ],
)
def test_decode_message(raw: bytes, details: str) -> None:
    assert decode_message(raw) == details


@given(st.text())
def test_grpc_message_round_trips_for_any_text(details: str) -> None:
    encoded = encode_message(details, limit=10**9)
    assert all(0x20 <= b <= 0x7E for b in encoded)
    assert decode_message(encoded) == details


@given(st.text(st.characters(codec=None), max_size=3000), st.integers(0, 200))
def test_any_string_encodes_within_the_limit_as_a_prefix(details: str, limit: int) -> None:
    """Surrogates included: what UTF-8 cannot carry becomes '?', and a cut keeps whole characters."""
    encoded = encode_message(details, limit=limit)
    assert len(encoded) <= limit
    decoded = decode_message(encoded)
    assert "\ufffd" not in decoded or "\ufffd" in details
    safe = details.encode("utf-8", "replace").decode("utf-8")
    assert safe.startswith(decoded)


def test_long_details_are_cut_to_the_default_limit() -> None:
    encoded = encode_message("ü" * 10_000)
    assert len(encoded) == MAX_DETAILS_BYTES // 6 * 6
    assert set(unquote(encoded.decode())) == {"ü"}


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({b"grpc-status": b"0"}, (Code.OK, ""), id="ok"),
        pytest.param(
            {b"grpc-status": b"5", b"grpc-message": b"no%20pod"}, (Code.NOT_FOUND, "no pod"), id="msg"
        ),
        pytest.param({b"grpc-status": b"99"}, (Code.UNKNOWN, ""), id="unknown-number"),
        pytest.param({b"grpc-status": b"x"}, (Code.UNKNOWN, "malformed grpc-status b'x'"), id="not-a-number"),
    ],
)
def test_status_of(headers: dict[bytes, bytes], status: tuple[Code, str] | None) -> None:
    assert status_of(headers) == status


@given(st.sampled_from(Code), st.text(max_size=200))
def test_status_headers_round_trip(code: Code, details: str) -> None:
    assert status_of(dict(status_headers(code, details))) == (code, details)


@pytest.mark.parametrize(
    ("seconds", "header"),
    [
        pytest.param(0.0, b"1m", id="zero-is-the-smallest"),
        pytest.param(-3.0, b"1m", id="past"),
        pytest.param(0.0004, b"1m", id="below-a-milli"),
        pytest.param(1.5, b"1500m", id="seconds"),
        pytest.param(99_999.999, b"99999999m", id="most-millis"),
        pytest.param(100_000.0, b"100000S", id="seconds-beyond"),
        pytest.param(10.0**12, b"99999999S", id="capped"),
    ],
)
def test_timeout_header(seconds: float, header: bytes) -> None:
    assert timeout_header(seconds) == header


@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param(b"404", Code.UNIMPLEMENTED, id="404"),
        pytest.param(b"504", Code.UNAVAILABLE, id="504"),
        pytest.param(b"418", Code.UNKNOWN, id="unlisted"),
        pytest.param(b"", Code.UNKNOWN, id="missing"),
        pytest.param(b"2oo", Code.UNKNOWN, id="not-a-number"),
    ],
)
def test_code_of_http_status(status: bytes, code: Code) -> None:
    assert code_of_http_status(status) is code


@pytest.mark.parametrize(
    ("error_code", "code"),
    [
        pytest.param(0x0, Code.INTERNAL, id="NO_ERROR"),
        pytest.param(0x7, Code.UNAVAILABLE, id="REFUSED_STREAM"),
        pytest.param(0x8, Code.CANCELLED, id="CANCEL"),
        pytest.param(0xB, Code.RESOURCE_EXHAUSTED, id="ENHANCE_YOUR_CALM"),
        pytest.param(0xC, Code.PERMISSION_DENIED, id="INADEQUATE_SECURITY"),
        pytest.param(0xFF, Code.INTERNAL, id="unknown"),
    ],
)
def test_code_of_reset(error_code: int, code: Code) -> None:
    assert code_of_reset(error_code) is code
