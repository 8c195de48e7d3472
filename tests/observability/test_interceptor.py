"""LatencyInterceptor times Allocate and GetPreferredAllocation of the real servicer over a real socket."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.model import ContainerEdits, Health, Pool, Unit
from hcs_deviceplugin.observability.interceptor import LatencyInterceptor
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.plugin.servicer import DevicePluginServicer
from hcs_deviceplugin.plugin.state import PoolState
from hcs_deviceplugin.rpc.server import RpcServer
from tests.observability.conftest import scrape, value

UNITS = (
    Unit("card-0", card_id="card-0", backend="fake"),
    Unit("card-1", card_id="card-1", backend="fake"),
    Unit("card-2", card_id="card-2", backend="fake", health=Health.UNHEALTHY),
)


def edits(_pool: Pool, units: Sequence[Unit]) -> ContainerEdits:
    return ContainerEdits(env={"VISIBLE": ",".join(u.id for u in units)})


@pytest.fixture
def plugin() -> Iterator[tuple[pb_grpc.DevicePluginStub, Metrics]]:
    """The pool's servicer on a unix socket, served with the interceptor as PluginServer would."""
    root = Path(tempfile.mkdtemp(prefix="hcs", dir="/tmp"))
    metrics = Metrics(process_metrics=False)
    state = PoolState(Pool("a", "gpu.deckhouse.io/a"), UNITS)
    servicer = DevicePluginServicer(state, edits)
    server = RpcServer(root / "a.sock", servicer.methods(), interceptors=[LatencyInterceptor(metrics, "a")])
    server.start()
    channel = grpc.insecure_channel(f"unix:{root / 'a.sock'}")
    try:
        yield pb_grpc.DevicePluginStub(channel), metrics
    finally:
        channel.close()
        server.stop(None).wait(5)
        shutil.rmtree(root, ignore_errors=True)


def allocate(ids: list[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])


def test_allocate_and_preferred_latency_are_observed_per_pool(
    plugin: tuple[pb_grpc.DevicePluginStub, Metrics],
) -> None:
    stub, metrics = plugin
    answer = stub.Allocate(allocate(["card-0"]), timeout=5)
    assert answer.container_responses[0].envs["VISIBLE"] == "card-0"
    with pytest.raises(grpc.RpcError) as rejected:
        stub.Allocate(allocate(["card-2"]), timeout=5)
    assert rejected.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # the abort still reaches kubelet
    preferred = stub.GetPreferredAllocation(
        pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=["card-0", "card-1"], allocation_size=1
                )
            ]
        ),
        timeout=5,
    )
    assert len(preferred.container_responses[0].deviceIDs) == 1
    stub.GetDevicePluginOptions(pb.Empty(), timeout=5)  # passes through untimed

    samples = scrape(metrics)
    assert value(samples, "hcs_allocate_seconds_count", pool="a") == 2
    assert value(samples, "hcs_allocate_requests_total", pool="a", result="ok") == 1
    assert value(samples, "hcs_allocate_requests_total", pool="a", result="rejected") == 1
    assert value(samples, "hcs_preferred_allocation_seconds_count", pool="a") == 1
    assert 0 < value(samples, "hcs_allocate_seconds_sum", pool="a") < 1.0
