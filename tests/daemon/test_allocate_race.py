"""Allocate racing a withdrawal: the hold is taken before the second look, so one of them sees the other.

The listener stands in for the daemon's hold book and, while it is being told, withdraws the units
from the pool as the server applier would in that instant. The answer must then be a refusal and
the hold undone; without the race the hold stays.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.model import ContainerEdits, Pool, Unit
from hcs_deviceplugin.plugin.server import PluginServer
from hcs_deviceplugin.plugin.sockets import socket_answers

POOL = Pool("a", "gpu.deckhouse.io/a")
UNITS = (Unit("X", "X", "sim"), Unit("Y", "Y", "sim"))


def no_edits(_pool: Pool, units: Sequence[Unit]) -> ContainerEdits:
    return ContainerEdits(env={"UNITS": ",".join(u.id for u in units)})


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="hcsr", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def serve(
    plugin_dir: Path, listener: Callable[[str, Sequence[str]], Callable[[], None] | None]
) -> PluginServer:
    server = PluginServer(POOL, UNITS, plugin_dir, no_edits, on_allocate=listener)
    server.start()
    deadline = time.monotonic() + 10
    while not socket_answers(server.socket_path, 0.1):
        assert time.monotonic() < deadline, "server socket answers"
        time.sleep(0.01)
    return server


def allocate(server: PluginServer, *ids: str) -> pb.AllocateResponse:
    with grpc.insecure_channel(f"unix:{server.socket_path}") as channel:
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids))])
        response: pb.AllocateResponse = pb_grpc.DevicePluginStub(channel).Allocate(request, timeout=10)
        return response


@dataclass
class Racing:
    """A server whose Allocate listener takes a hold and, in that instant, withdraws unit X."""

    server: PluginServer
    holds: list[str]


@pytest.fixture
def racing(plugin_dir: Path) -> Iterator[Racing]:
    holds: list[str] = []
    servers: list[PluginServer] = []

    def listener(_pool: str, ids: Sequence[str]) -> Callable[[], None]:
        holds.extend(ids)
        servers[0].update(POOL, UNITS[1:])  # the applier withdraws X right now
        return holds.clear

    servers.append(serve(plugin_dir, listener))
    yield Racing(servers[0], holds)
    servers[0].stop()


def test_withdrawn_while_allocating_is_refused_and_the_hold_undone(racing: Racing) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        allocate(racing.server, "X")
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "withdrawn while allocating" in str(caught.value.details())
    assert racing.holds == []


def test_a_change_that_keeps_the_units_does_not_refuse(racing: Racing) -> None:
    response = allocate(racing.server, "Y")  # Y is still in the list after X left
    assert response.container_responses[0].envs["UNITS"] == "Y"
    assert racing.holds == ["Y"]
