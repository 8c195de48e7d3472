"""The HTTP/2 state (rpc/http2.py) without sockets: h2, an independent implementation, plays the
peer where a well-behaved one will do; raw frames play the rest.

Each rule of RFC 9113 on what a peer may send is a row: the frames, and whether the connection
ends (with which GOAWAY code) or only the stream (with which RST_STREAM code).
"""

from __future__ import annotations

import itertools
import struct

import h2.config
import h2.connection
import h2.events
import hpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.rpc.frames import (
    PREFACE,
    ErrorCode,
    encode_fields,
    frame_bytes,
    goaway_frame,
    read_frame_header,
    rst_stream_frame,
    settings_frame,
    window_update_frame,
)
from hcs_deviceplugin.rpc.http2 import (
    MAX_HEADER_LIST_SIZE,
    Connection,
    ConnectionFailed,
    DataReceived,
    Event,
    GoAwayReceived,
    HeadersReceived,
    StreamGone,
    StreamReset,
    WindowOpened,
)

REQUEST = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/t.T/Echo"),
    (b":authority", b"localhost"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
]
OPENING = PREFACE + settings_frame([])


def server() -> Connection:
    conn = Connection(client_side=False)
    conn.start()
    conn.receive(OPENING)
    conn.data_to_send()
    return conn


def frames_of(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each frame in ``data``."""
    out = []
    position = 0
    while position < len(data):
        length, kind, flags, stream_id = read_frame_header(data, position)
        out.append((kind, flags, stream_id, data[position + 9 : position + 9 + length]))
        position += 9 + length
    return out


def headers_frame(stream_id: int, fields: list[tuple[bytes, bytes]], flags: int = 0x4 | 0x1) -> bytes:
    return frame_bytes(0x1, flags, stream_id, encode_fields(fields))


def request(stream_id: int = 1, fields: list[tuple[bytes, bytes]] = REQUEST) -> bytes:
    return headers_frame(stream_id, fields, 0x4)


def goaway_code(conn: Connection, data: bytes) -> int:
    with pytest.raises(ConnectionFailed):
        conn.receive(data)
    (goaway,) = [f for f in frames_of(conn.data_to_send()) if f[0] == 0x7]
    return int.from_bytes(goaway[3][4:8], "big")


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        pytest.param(
            b"\x00\x40\x01\x00\x00\x00\x00\x00\x01", ErrorCode.FRAME_SIZE_ERROR, id="over-16k-at-header"
        ),
        pytest.param(frame_bytes(0x0, 0, 0, b"x"), ErrorCode.PROTOCOL_ERROR, id="data-on-stream-0"),
        pytest.param(frame_bytes(0x0, 0, 3, b"x"), ErrorCode.PROTOCOL_ERROR, id="data-on-idle-stream"),
        pytest.param(request(2), ErrorCode.PROTOCOL_ERROR, id="client-opens-even-stream"),
        pytest.param(headers_frame(0, REQUEST), ErrorCode.PROTOCOL_ERROR, id="headers-on-stream-0"),
        pytest.param(frame_bytes(0x6, 0, 0, b"1234567"), ErrorCode.FRAME_SIZE_ERROR, id="short-ping"),
        pytest.param(frame_bytes(0x6, 0, 1, b"12345678"), ErrorCode.PROTOCOL_ERROR, id="ping-on-a-stream"),
        pytest.param(frame_bytes(0x4, 0, 1, b""), ErrorCode.PROTOCOL_ERROR, id="settings-on-a-stream"),
        pytest.param(frame_bytes(0x4, 0, 0, b"\x00" * 5), ErrorCode.FRAME_SIZE_ERROR, id="settings-not-6n"),
        pytest.param(frame_bytes(0x4, 1, 0, b"\x00" * 6), ErrorCode.FRAME_SIZE_ERROR, id="settings-ack-body"),
        pytest.param(settings_frame([(5, 16383)]), ErrorCode.PROTOCOL_ERROR, id="max-frame-too-small"),
        pytest.param(settings_frame([(5, 2**24)]), ErrorCode.PROTOCOL_ERROR, id="max-frame-too-large"),
        pytest.param(
            settings_frame([(4, 2**31)]), ErrorCode.FLOW_CONTROL_ERROR, id="initial-window-too-large"
        ),
        pytest.param(settings_frame([(2, 2)]), ErrorCode.PROTOCOL_ERROR, id="enable-push-2"),
        pytest.param(window_update_frame(0, 0), ErrorCode.PROTOCOL_ERROR, id="zero-connection-update"),
        pytest.param(
            window_update_frame(0, 2**31 - 1), ErrorCode.FLOW_CONTROL_ERROR, id="connection-window-over"
        ),
        pytest.param(
            frame_bytes(0x8, 0, 0, b"\x00\x01"), ErrorCode.FRAME_SIZE_ERROR, id="short-window-update"
        ),
        pytest.param(window_update_frame(5, 1), ErrorCode.PROTOCOL_ERROR, id="update-on-idle-stream"),
        pytest.param(rst_stream_frame(0, 8), ErrorCode.PROTOCOL_ERROR, id="rst-on-stream-0"),
        pytest.param(rst_stream_frame(7, 8), ErrorCode.PROTOCOL_ERROR, id="rst-on-idle-stream"),
        pytest.param(frame_bytes(0x3, 0, 1, b"\x00"), ErrorCode.FRAME_SIZE_ERROR, id="short-rst"),
        pytest.param(frame_bytes(0x5, 0x4, 1, b"\x00" * 4), ErrorCode.PROTOCOL_ERROR, id="push-promise"),
        pytest.param(frame_bytes(0x9, 0x4, 1, b""), ErrorCode.PROTOCOL_ERROR, id="continuation-alone"),
        pytest.param(
            headers_frame(1, REQUEST, 0) + frame_bytes(0x6, 0, 0, b"12345678"),
            ErrorCode.PROTOCOL_ERROR,
            id="header-block-interrupted",
        ),
        pytest.param(
            headers_frame(1, REQUEST, 0) + frame_bytes(0x9, 0x4, 3, b""),
            ErrorCode.PROTOCOL_ERROR,
            id="continuation-on-another-stream",
        ),
        pytest.param(
            frame_bytes(0x1, 0x4, 1, b"\xff\xff\xff\xff"), ErrorCode.COMPRESSION_ERROR, id="bad-hpack"
        ),
        pytest.param(
            frame_bytes(0x1, 0x4 | 0x8, 1, b"\x05abc"), ErrorCode.PROTOCOL_ERROR, id="padding-too-long"
        ),
        pytest.param(
            frame_bytes(0x1, 0x4 | 0x20, 1, b"\x00\x00"), ErrorCode.FRAME_SIZE_ERROR, id="short-priority"
        ),
        pytest.param(frame_bytes(0x7, 0, 0, b"\x00" * 7), ErrorCode.FRAME_SIZE_ERROR, id="short-goaway"),
        pytest.param(frame_bytes(0x7, 0, 1, b"\x00" * 8), ErrorCode.PROTOCOL_ERROR, id="goaway-on-a-stream"),
        pytest.param(
            frame_bytes(0x1, 0, 1, encode_fields(REQUEST))
            + b"".join(frame_bytes(0x9, 0, 1, b"\x00" * 16384) for _ in range(5)),
            ErrorCode.ENHANCE_YOUR_CALM,
            id="endless-continuation",
        ),
        pytest.param(
            request(1, [*REQUEST, (b"x-big", b"v" * (MAX_HEADER_LIST_SIZE - 200))]),
            ErrorCode.ENHANCE_YOUR_CALM,
            id="header-list-too-large",
        ),
    ],
)
def test_connection_errors_end_the_connection_with_a_goaway_that_says_why(
    frames: bytes, code: ErrorCode
) -> None:
    assert goaway_code(server(), frames) == code


@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", id="http1"),
        pytest.param(PREFACE[:10] + b"X", id="preface-cut-wrong"),
        pytest.param(PREFACE + frame_bytes(0x6, 0, 0, b"12345678"), id="first-frame-not-settings"),
    ],
)
def test_a_bad_opening_is_a_protocol_error(opening: bytes) -> None:
    conn = Connection(client_side=False)
    conn.start()
    conn.data_to_send()
    assert goaway_code(conn, opening) == ErrorCode.PROTOCOL_ERROR


def reset_code(conn: Connection, data: bytes, stream_id: int = 1) -> int:
    """Feed ``data``: the connection must live and reset ``stream_id``; the reset's code."""
    conn.receive(data)
    resets = [f for f in frames_of(conn.data_to_send()) if f[0] == 0x3 and f[2] == stream_id]
    assert len(resets) == 1, resets
    return int.from_bytes(resets[0][3], "big")


def without(name: bytes) -> list[tuple[bytes, bytes]]:
    return [f for f in REQUEST if f[0] != name]


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        pytest.param([*REQUEST, (b"X-Upper", b"v")], ErrorCode.PROTOCOL_ERROR, id="uppercase-name"),
        pytest.param([*REQUEST, (b"connection", b"close")], ErrorCode.PROTOCOL_ERROR, id="connection-header"),
        pytest.param([*without(b"te"), (b"te", b"gzip")], ErrorCode.PROTOCOL_ERROR, id="te-not-trailers"),
        pytest.param(without(b":path"), ErrorCode.PROTOCOL_ERROR, id="no-path"),
        pytest.param([*without(b":path"), (b":path", b"")], ErrorCode.PROTOCOL_ERROR, id="empty-path"),
        pytest.param(without(b":method"), ErrorCode.PROTOCOL_ERROR, id="no-method"),
        pytest.param([*REQUEST, (b":method", b"POST")], ErrorCode.PROTOCOL_ERROR, id="pseudo-after-regular"),
        pytest.param([(b":status", b"200"), *REQUEST], ErrorCode.PROTOCOL_ERROR, id="response-pseudo"),
        pytest.param([(b":method", b"POST"), *REQUEST], ErrorCode.PROTOCOL_ERROR, id="duplicate-method"),
        pytest.param([*REQUEST, (b"x-bad", b"a\r\nb")], ErrorCode.PROTOCOL_ERROR, id="crlf-in-value"),
        pytest.param([*REQUEST, (b"x bad", b"v")], ErrorCode.PROTOCOL_ERROR, id="space-in-name"),
        pytest.param([*REQUEST, ("x-é".encode(), b"v")], ErrorCode.PROTOCOL_ERROR, id="non-ascii-name"),
        pytest.param([*REQUEST, (b"x-bad", b" v")], ErrorCode.PROTOCOL_ERROR, id="leading-space-in-value"),
        pytest.param([*REQUEST, (b"x-bad", b"v\t")], ErrorCode.PROTOCOL_ERROR, id="trailing-tab-in-value"),
    ],
)
def test_a_malformed_request_resets_only_its_stream(
    fields: list[tuple[bytes, bytes]], code: ErrorCode
) -> None:
    conn = server()
    assert reset_code(conn, request(1, fields)) == code
    events = conn.receive(request(3))
    assert [type(e) for e in events] == [HeadersReceived]


def test_data_after_the_request_ended_resets_the_stream_and_says_so() -> None:
    conn = server()
    conn.receive(request(1) + frame_bytes(0x0, 0x1, 1, b"body"))
    conn.data_to_send()
    events = conn.receive(frame_bytes(0x0, 0, 1, b"stray"))
    assert [(type(e), e.stream_id) for e in events if isinstance(e, StreamReset)] == [(StreamReset, 1)]
    with pytest.raises(StreamGone):
        conn.send_header_block(1, b"")


def test_streams_past_the_limit_are_refused() -> None:
    conn = Connection(client_side=False, max_streams=2)
    conn.start()
    conn.receive(OPENING)
    conn.receive(request(1) + request(3))
    conn.data_to_send()
    assert reset_code(conn, request(5), 5) == ErrorCode.REFUSED_STREAM


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        pytest.param(window_update_frame(1, 0), ErrorCode.PROTOCOL_ERROR, id="zero-stream-update"),
        pytest.param(
            window_update_frame(1, 2**31 - 1), ErrorCode.FLOW_CONTROL_ERROR, id="stream-window-over"
        ),
        pytest.param(frame_bytes(0x2, 0, 1, b"\x00" * 4), ErrorCode.FRAME_SIZE_ERROR, id="short-priority"),
        pytest.param(
            headers_frame(1, [(b"grpc-status", b"0")], 0x4), ErrorCode.PROTOCOL_ERROR, id="trailers-no-end"
        ),
        pytest.param(
            headers_frame(1, [(b":path", b"/x")]), ErrorCode.PROTOCOL_ERROR, id="pseudo-in-trailers"
        ),
    ],
)
def test_stream_errors_on_an_open_stream(frames: bytes, code: ErrorCode) -> None:
    conn = server()
    conn.receive(request(1))
    conn.data_to_send()
    assert reset_code(conn, frames) == code


def test_frames_for_a_stream_closed_long_ago_cost_only_that_stream() -> None:
    conn = server()
    for stream_id in range(1, 200, 2):
        conn.receive(request(stream_id) + frame_bytes(0x0, 0x1, stream_id, b"x"))
        conn.send_header_block(stream_id, b"\x88", end_stream=True)
    assert conn._streams == {}
    conn.data_to_send()
    assert conn.receive(window_update_frame(1, 100) + rst_stream_frame(3, 8)) == []
    assert reset_code(conn, frame_bytes(0x0, 0, 5, b"late"), 5) == ErrorCode.STREAM_CLOSED


def h2_client() -> h2.connection.H2Connection:
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    client.initiate_connection()
    return client


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def summary(events: list[Event]) -> list[tuple[str, int, bytes, bool]]:
    out = []
    for event in events:
        if isinstance(event, HeadersReceived):
            out.append(("headers", event.stream_id, repr(event.fields).encode(), event.end_stream))
        elif isinstance(event, DataReceived):
            out.append(("data", event.stream_id, event.data, event.end_stream))
    return out


@given(
    bodies=st.lists(st.binary(max_size=40_000), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 10**6), max_size=30),
    padding=st.integers(0, 255),
)
def test_any_chunking_of_a_conversation_gives_the_same_requests(
    bodies: list[bytes], cuts: list[int], padding: int
) -> None:
    client = h2_client()
    for body in bodies:
        stream_id = client.get_next_available_stream_id()
        client.send_headers(stream_id, REQUEST)
        client.send_data(stream_id, body, end_stream=True, pad_length=padding if len(body) < 16000 else None)
    wire = client.data_to_send()
    whole = Connection(client_side=False, receive_window=1 << 20)
    whole.start()
    expected = summary(whole.receive(wire))
    joined: dict[int, bytes] = {}
    for kind, stream_id, data, _ in expected:
        if kind == "data":
            joined[stream_id] = joined.get(stream_id, b"") + data
    assert [joined.get(2 * i + 1, b"") for i in range(len(bodies))] == bodies
    pieces = Connection(client_side=False, receive_window=1 << 20)
    pieces.start()
    got = [e for chunk in chunked(wire, cuts) for e in summary(pieces.receive(chunk))]
    assert b"".join(e[2] for e in got if e[0] == "data") == b"".join(bodies)
    assert [e for e in got if e[0] == "headers"] == [e for e in expected if e[0] == "headers"]


def test_h2_reads_what_we_send_and_we_read_what_it_sends() -> None:
    """A whole call, our server against h2's client: settings, ping, a long answer over windows."""
    client = h2_client()
    conn = Connection(client_side=False)
    conn.start()
    client_events = client.receive_data(conn.data_to_send())
    stream_id = client.get_next_available_stream_id()
    client.send_headers(stream_id, REQUEST)
    client.send_data(stream_id, b"request", end_stream=True)
    client.ping(b"pingpong")
    events = conn.receive(client.data_to_send())
    assert summary(events)[-1] == ("data", 1, b"request", True)
    answer = bytes(range(256)) * 1000  # past the 65,535-byte initial window
    conn.send_header_block(
        stream_id, encode_fields([(b":status", b"200"), (b"content-type", b"application/grpc")])
    )
    sent = 0
    received = b""
    ended = False
    while not ended:
        while (
            sent < len(answer)
            and (window := min(conn.send_window(stream_id), conn.max_outbound_frame_size)) > 0
        ):
            chunk = answer[sent : sent + window]
            conn.send_data(stream_id, chunk)
            sent += len(chunk)
        if sent == len(answer) and conn.is_open(stream_id):
            conn.send_headers(stream_id, [(b"grpc-status", b"0")], end_stream=True)
        for event in client.receive_data(conn.data_to_send()):
            client_events.append(event)
            if isinstance(event, h2.events.DataReceived):
                received += event.data
                client.acknowledge_received_data(event.flow_controlled_length, stream_id)
            ended = ended or isinstance(event, h2.events.StreamEnded)
        conn.receive(client.data_to_send())
    assert received == answer
    assert any(isinstance(e, h2.events.PingAckReceived) and e.ping_data == b"pingpong" for e in client_events)
    trailers = next(e for e in client_events if isinstance(e, h2.events.TrailersReceived))
    assert dict(trailers.headers) == {b"grpc-status": b"0"}
    assert conn._streams == {}


def test_a_lower_initial_window_shrinks_open_streams_windows() -> None:
    conn = server()
    conn.receive(request(1))
    assert conn.send_window(1) == 65_535
    conn.receive(settings_frame([(4, 1000)]))
    assert conn.send_window(1) == 1000
    conn.send_data(1, b"x" * 1000)
    conn.receive(settings_frame([(4, 0)]))
    assert conn.send_window(1) == 0  # the stream's window is now -1000 (RFC 9113 §6.9.2)
    conn.receive(window_update_frame(1, 1500))
    assert conn.send_window(1) == 500
    with pytest.raises(ValueError, match="do not fit"):
        conn.send_data(1, b"x" * 501)


def test_read_data_gives_window_back_in_half_window_steps() -> None:
    conn = server()
    conn.receive(request(1))
    conn.data_to_send()
    conn.receive(frame_bytes(0x0, 0, 1, b"x" * 16_000) * 2)  # 32,000: under half of 65,535
    assert [f for f in frames_of(conn.data_to_send()) if f[0] == 0x8] == []
    conn.receive(frame_bytes(0x0, 0, 1, b"x" * 16_000))
    updates = {f[2]: int.from_bytes(f[3], "big") for f in frames_of(conn.data_to_send()) if f[0] == 0x8}
    assert updates == {0: 48_000, 1: 48_000}


def test_a_goaway_is_an_event_and_the_calls_go_on() -> None:
    conn = server()
    events = conn.receive(request(1) + goaway_frame(0x8000_0001, 0) + frame_bytes(0x0, 0x1, 1, b"after"))
    assert [type(e) for e in events] == [HeadersReceived, GoAwayReceived, DataReceived]
    goaway = events[1]
    assert isinstance(goaway, GoAwayReceived) and (goaway.last_stream_id, goaway.error_code) == (1, 0)
    conn.send_headers(1, [(b":status", b"200")], end_stream=True)
    assert conn.data_to_send()


def test_a_ping_is_acknowledged_with_its_data() -> None:
    conn = server()
    conn.receive(frame_bytes(0x6, 0, 0, b"87654321"))
    assert frames_of(conn.data_to_send()) == [(0x6, 0x1, 0, b"87654321")]


def test_long_header_blocks_go_out_as_headers_and_continuations() -> None:
    conn = server()
    conn.receive(request(1))
    conn.data_to_send()
    fields = [(b"x-long-%d" % i, b"v" * 1000) for i in range(40)]
    conn.send_headers(1, fields)
    sent = frames_of(conn.data_to_send())
    assert [f[0] for f in sent] == [0x1, 0x9, 0x9]
    assert [f[1] & 0x4 for f in sent] == [0, 0, 0x4]
    assert hpack.Decoder().decode(b"".join(f[3] for f in sent), raw=True) == fields


fields_strategy = st.lists(
    st.tuples(
        st.sampled_from([b":status", b":path", b"content-type", b"grpc-status", b"user-agent"])
        | st.binary(min_size=1, max_size=300),
        st.sampled_from([b"200", b"POST", b"/", b"http"]) | st.binary(max_size=300),
    ),
    max_size=12,
)


@given(fields=fields_strategy, table_size=st.none() | st.integers(0, 4096))
def test_our_header_blocks_decode_to_what_we_encoded_and_leave_the_table_empty(
    fields: list[tuple[bytes, bytes]], table_size: int | None
) -> None:
    decoder = hpack.Decoder()
    assert decoder.decode(encode_fields(fields, table_size), raw=True) == fields
    assert len(decoder.header_table.dynamic_entries) == 0


def test_a_lower_header_table_size_is_acknowledged_in_our_next_block() -> None:
    conn = server()
    conn.receive(request(1) + settings_frame([(1, 0)]))
    conn.data_to_send()
    conn.send_headers(1, [(b":status", b"200")])
    (headers,) = [f for f in frames_of(conn.data_to_send()) if f[0] == 0x1]
    assert headers[3] == b"\x20\x88"  # size update to 0, then :status 200 from the static table
    conn.send_headers(1, [(b"grpc-status", b"0")], end_stream=True)
    (trailers,) = [f for f in frames_of(conn.data_to_send()) if f[0] == 0x1]
    assert not trailers[3].startswith(b"\x20")


def test_frame_header_round_trip() -> None:
    data = frame_bytes(0x1, 0x25, 0x7FFF_FFFF, b"abc")
    assert read_frame_header(data, 0) == (3, 0x1, 0x25, 0x7FFF_FFFF)
    assert read_frame_header(struct.pack(">HBBBL", 0xFFFF, 0xFF, 9, 0, 0xFFFF_FFFF), 0) == (
        2**24 - 1,
        9,
        0,
        0x7FFF_FFFF,
    )


def test_a_repeated_indexed_block_means_what_the_table_says_now() -> None:
    """Blocks of one-byte indexed fields are decoded once and kept, until the table may change."""
    encoder = hpack.Encoder()
    pseudo = b"\x83\x86\x84"  # :method POST, :scheme http, :path / (static table)
    conn = server()

    def fields(stream_id: int, block: bytes) -> list[tuple[bytes, bytes]]:
        (event,) = conn.receive(frame_bytes(0x1, 0x4 | 0x1, stream_id, block))
        assert isinstance(event, HeadersReceived)
        return event.fields[3:]

    assert fields(1, pseudo + encoder.encode([(b"x-a", b"1")])) == [(b"x-a", b"1")]  # now entry 62
    assert fields(3, pseudo + b"\xbe") == [(b"x-a", b"1")]
    assert fields(5, pseudo + b"\xbe") == [(b"x-a", b"1")]  # from the record
    assert fields(7, pseudo + encoder.encode([(b"x-b", b"2")])) == [(b"x-b", b"2")]  # x-b is 62 now
    assert fields(9, pseudo + b"\xbe") == [(b"x-b", b"2")]
    assert reset_code(conn, frame_bytes(0x1, 0x4 | 0x1, 11, b"\x83\x86\xbe"), 11) == ErrorCode.PROTOCOL_ERROR


def test_a_higher_initial_window_is_a_window_opened_event() -> None:
    """A sender waiting for window must hear of a SETTINGS that grows it (no WINDOW_UPDATE comes)."""
    conn = server()
    conn.receive(request(1))
    conn.receive(settings_frame([(4, 0)]))
    assert conn.send_window(1) == 0
    events = conn.receive(settings_frame([(4, 1000)]))
    assert conn.send_window(1) == 1000
    assert WindowOpened in [type(e) for e in events]
    assert WindowOpened not in [type(e) for e in conn.receive(settings_frame([(4, 500)]))]


def test_inner_whitespace_and_any_bytes_in_values_are_fine() -> None:
    conn = server()
    fields = [*REQUEST, (b"user-agent", b"grpc-go/1.72.0 (linux)"), (b"x-bin", b"\xff\x01 \x7f")]
    (event,) = conn.receive(request(1, fields))
    assert isinstance(event, HeadersReceived) and event.fields == fields


def test_a_malformed_priority_on_an_idle_stream_is_dropped_without_a_reset() -> None:
    """Resetting a stream never opened would be our own protocol error (RFC 9113 §5.1)."""
    conn = server()
    assert conn.receive(frame_bytes(0x2, 0, 9, b"\x00" * 4)) == []
    assert conn.data_to_send() == b""
    assert [type(e) for e in conn.receive(request(1))] == [HeadersReceived]
