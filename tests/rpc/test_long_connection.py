"""A connection kept for the life of a plugin (kubelet's) costs bounded memory however many calls
it carries, and frames for streams closed long ago still cost only those streams."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import h2.events
import hyperframe.frame

from hcs_deviceplugin.rpc.server import RpcServer
from tests.rpc.conftest import WAIT, RawClient, unary

CALLS = 1500


def streams_kept(server: RpcServer) -> list[int]:
    """How many streams each open connection's HTTP/2 state holds."""
    return [len(c._h2._streams) for c in list(server._connections)]


def test_many_calls_on_one_connection_keep_a_bounded_record(server: RpcServer) -> None:
    with grpc.insecure_channel(f"unix:{server.path}") as chan:
        echo = unary(chan, "/t.T/Echo")
        for i in range(CALLS):
            assert echo(b"%d" % i, timeout=WAIT) == b"%d" % i
        kept = streams_kept(server)
    assert kept == [0], kept  # every call answered, none remembered


def test_a_late_frame_for_a_forgotten_stream_costs_only_that_stream(
    server: RpcServer, raw_client: Callable[[], RawClient]
) -> None:
    client = raw_client()
    client.handshake()
    for i in range(CALLS):
        stream_id = client.request("/t.T/Echo", b"%d" % i)
        assert client.status(stream_id)[b"grpc-status"] == b"0"
    late = hyperframe.frame.WindowUpdateFrame(1)  # the first stream, long closed and forgotten
    late.window_increment = 1024
    client.sock.sendall(late.serialize())
    stream_id = client.request("/t.T/Echo", b"after")
    assert client.status(stream_id)[b"grpc-status"] == b"0"
    assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in client.events)
