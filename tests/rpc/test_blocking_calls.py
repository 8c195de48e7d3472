"""``Unary(blocking=True)``: calls that may wait on I/O run on the server's workers, side by side,
while in-memory calls stay on the connection's reader (one at a time per connection)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from hcs_deviceplugin.rpc.calls import CallContext, Unary
from hcs_deviceplugin.rpc.server import RpcServer
from tests.rpc.conftest import WAIT, Raw, unary


class Gate:
    """A handler that waits until ``count`` calls are inside it at once (or the bound runs out)."""

    def __init__(self, count: int) -> None:
        self.barrier = threading.Barrier(count, timeout=2.0)

    def handle(self, request: bytes, context: CallContext) -> Raw:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return Raw(b"alone")
        return Raw(b"together")


def serve(sock_dir: Path, blocking: bool, gate: Gate) -> RpcServer:
    server = RpcServer(sock_dir / "b.sock", {"/t.T/Gate": Unary(bytes, gate.handle, blocking=blocking)})
    server.start()
    return server


@pytest.fixture
def gate() -> Gate:
    return Gate(3)


@pytest.mark.parametrize(("blocking", "expected"), [(True, b"together"), (False, b"alone")])
def test_blocking_calls_on_one_connection_run_side_by_side(
    sock_dir: Path, gate: Gate, blocking: bool, expected: bytes
) -> None:
    """Three calls on one channel meet inside the handler only when they run on the workers; on the
    reader the first waits alone until the barrier gives up (2 s), and the others find it broken."""
    server = serve(sock_dir, blocking, gate)
    try:
        with grpc.insecure_channel(f"unix:{server.path}") as chan, ThreadPoolExecutor(3) as pool:
            call = unary(chan, "/t.T/Gate")
            answers = list(pool.map(lambda _i: call(b"", timeout=WAIT), range(3)))
        assert answers == [expected] * 3
    finally:
        server.stop(None).wait(WAIT)


def test_a_stopped_server_takes_no_more_blocking_work(sock_dir: Path, gate: Gate) -> None:
    server = serve(sock_dir, True, gate)
    server.stop(None).wait(WAIT)
    assert server.workers.submit(lambda: None) is False
