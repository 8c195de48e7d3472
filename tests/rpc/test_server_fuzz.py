"""Arbitrary bytes after a valid preface: the server answers with protocol errors only, never an
unexpected exception, and keeps serving everyone else."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import h2.config
import h2.connection
import hyperframe.frame
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.rpc.server import RpcServer
from tests.rpc.conftest import WAIT, Methods, RawClient

FRAME_TYPES = st.integers(0, 10) | st.integers(11, 255)
raw_frames = st.builds(
    lambda kind, flags, stream, body: (
        len(body).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + body
    ),
    FRAME_TYPES,
    st.integers(0, 255),
    st.sampled_from([0, 1, 2, 3, 2**31 - 1, 2**32 - 1]),
    st.binary(max_size=64),
)


def preface() -> bytes:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    return conn.data_to_send()


def a_request() -> bytes:
    """HEADERS + DATA of a valid Echo call on stream 1, to give the noise a stream to land on."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    conn.data_to_send()
    headers = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/t.T/Echo"),
        (b":authority", b"x"),
        (b"content-type", b"application/grpc"),
    ]
    conn.send_headers(1, headers)
    conn.send_data(1, b"\x00\x00\x00\x00\x02hi", end_stream=False)
    return conn.data_to_send()


def test_noise_after_the_preface_costs_only_its_connection(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RpcServer(sock_dir / "f.sock", Methods().table(), name="fuzz")
    server.start()
    opening = preface() + hyperframe.frame.SettingsFrame(0, flags=["ACK"]).serialize() + a_request()

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(raw_frames, min_size=1, max_size=6), st.binary(max_size=40))
    def noise(frames: list[bytes], tail: bytes) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with sock:
            sock.settimeout(WAIT)
            sock.connect(str(server.path))
            try:
                sock.sendall(opening + b"".join(frames) + tail)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(65536):  # until the server hangs up
                    pass
            except (BrokenPipeError, ConnectionResetError):
                pass

    try:
        with caplog.at_level(logging.ERROR, logger="hcs_deviceplugin.rpc"):
            noise()
        assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], caplog.text
        client = RawClient(server.path)
        client.handshake()
        stream_id = client.request("/t.T/Echo", b"still here")
        assert client.status(stream_id)[b"grpc-status"] == b"0"
        client.close()
    finally:
        assert server.stop(None).wait(WAIT)
