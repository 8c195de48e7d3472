"""ListAndWatch streams are bounded per pool, so clients that never read cannot take every worker.

Each open stream pins a server worker for its lifetime. Kubelet holds one stream per pool; anything
beyond a few is a misbehaving or stale client, and the oldest such stream is ended for the newest.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.plugin.servicer import MAX_STREAMS
from tests.plugin.conftest import WAIT, ServerFactory, pool, units
from tests.plugin.test_servicer import allocate, serving
from tests.waiting import wait_until

IDLE_STREAMS = 20
UNARY_DEADLINE = 3.0


def preferred() -> pb.PreferredAllocationRequest:
    return pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=["u0", "u1"], allocation_size=1)
        ]
    )


def first_message_or_end(call: Any) -> None:
    """Read a stream's first message (an evicted stream may have ended before sending it)."""
    with contextlib.suppress(grpc.RpcError):
        next(call)


def test_streams_that_never_read_leave_workers_for_kubelet_calls(make_server: ServerFactory) -> None:
    server = serving(make_server())
    with grpc.insecure_channel(f"unix:{server.socket_path}") as channel:
        stub = pb_grpc.DevicePluginStub(channel)
        # Raw calls (gRPC's stubs type them as bare iterators; they are futures too), never iterated.
        idle: list[Any] = [stub.ListAndWatch(pb.Empty()) for _ in range(IDLE_STREAMS)]

        # Kubelet's unary calls, several at once, all answer within a short deadline.
        with ThreadPoolExecutor(max_workers=8) as pool_:
            answers = [
                pool_.submit(stub.Allocate, allocate("u0"), timeout=UNARY_DEADLINE) for _ in range(4)
            ] + [
                pool_.submit(stub.GetPreferredAllocation, preferred(), timeout=UNARY_DEADLINE)
                for _ in range(4)
            ]
            for answer in answers:
                answer.result()

        # The surplus streams were ended by the server, not left pinning workers. gRPC shows a
        # client a stream's end only once it has read what came before, so read the first message.
        for call in idle:
            first_message_or_end(call)
        wait_until(
            lambda: sum(call.done() for call in idle) == IDLE_STREAMS - MAX_STREAMS,
            what="the oldest streams are ended",
        )
        assert server.status().open_streams == MAX_STREAMS
        # Ended by the server: cancelled, or closed if its loop saw the eviction before the cancel.
        assert {call.code() for call in idle if call.done()} <= {
            grpc.StatusCode.CANCELLED,
            grpc.StatusCode.OK,
        }

        # A new stream (kubelet reconnecting) is served in full: current list, then updates.
        newest: Any = stub.ListAndWatch(pb.Empty(), timeout=WAIT)
        assert [d.ID for d in next(newest).devices] == ["u0", "u1"]
        server.update(pool(), units("u0", "u1", "u2"))
        assert [d.ID for d in next(newest).devices] == ["u0", "u1", "u2"]
        wait_until(
            lambda: sum(call.done() for call in idle) == IDLE_STREAMS - MAX_STREAMS + 1,
            what="the newest stream displaced one more idle stream",
        )
        assert server.status().open_streams == MAX_STREAMS
        newest.cancel()
        for call in idle:
            call.cancel()
