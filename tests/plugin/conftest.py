"""Fixtures for one pool's server: a short socket dir (unix paths are limited to 107 bytes), pools and
units, servers that are always stopped, the kubelet simulator, and a Registration service that hangs.

Everything is real: gRPC over unix sockets in a temp dir, the simulator as kubelet. The hanging
Registration service stands in for a kubelet stuck inside Register, which the simulator cannot do.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.model import ContainerEdits, Health, Pool, Unit
from hcs_deviceplugin.plugin.server import Backoff, PluginServer

WAIT = 10.0
RESOURCE = "hcs.example.com/a"
FAST = Backoff(initial=0.02, maximum=0.2)


def pool(name: str = "a", resource: str = RESOURCE) -> Pool:
    return Pool(name=name, resource_name=resource)


def units(*ids: str, unhealthy: Sequence[str] = ()) -> list[Unit]:
    return [
        Unit(
            id=i,
            card_id=f"card-{i}",
            backend="fake",
            health=Health.UNHEALTHY if i in unhealthy else Health.HEALTHY,
        )
        for i in ids
    ]


def edits(_pool: Pool, chosen: Sequence[Unit]) -> ContainerEdits:
    """Names the units; a unit whose id starts with ``unready`` makes it fail as a backend whose
    sharing machinery is not up does."""
    unready = [u.id for u in chosen if u.id.startswith("unready")]
    if unready:
        raise ValueError(f"card of {unready[0]}: its sharing daemon is not running")
    return ContainerEdits(env={"UNITS": ",".join(u.id for u in chosen)})


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="hp", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def plugin_dir(sock_dir: Path) -> Path:
    path = sock_dir / "dp"
    path.mkdir()
    return path


ServerFactory = Callable[..., PluginServer]


@pytest.fixture
def make_server(plugin_dir: Path) -> Iterator[ServerFactory]:
    """Build and start servers for pool "a" in ``plugin_dir``; every one is stopped at the end."""
    made: list[PluginServer] = []

    def make(unit_ids: Sequence[str] = ("u0", "u1"), **kwargs: Any) -> PluginServer:
        kwargs.setdefault("backoff", FAST)
        edits_function = kwargs.pop("edits", edits)
        server = PluginServer(pool(), units(*unit_ids), plugin_dir, edits_function, **kwargs)
        made.append(server)
        server.start()
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[KubeletSimulator]:
    sim = KubeletSimulator(plugin_dir, dial_timeout=2.0)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


class FakeRegistration(pb_grpc.RegistrationServicer):
    """A bare kubelet.sock: Register hangs until released (``hang``) or is accepted at once.

    Unlike the simulator it neither wipes the directory when it starts nor dials the plugin back,
    which lets a test create the orders of events a real node can produce.
    """

    def __init__(self, socket_path: Path, hang: bool = True) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        if not hang:
            self.release.set()
        self._executor = ThreadPoolExecutor(max_workers=4)
        self._server = grpc.server(self._executor)
        pb_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix:{socket_path}")
        self._server.start()

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.calls += 1
        self.entered.set()
        self.release.wait(WAIT)
        return pb.Empty()

    def close(self) -> None:
        self.release.set()
        self._server.stop(None)
        self._executor.shutdown(wait=False)


@pytest.fixture
def hanging_kubelet(plugin_dir: Path) -> Iterator[FakeRegistration]:
    fake = FakeRegistration(plugin_dir / "kubelet.sock")
    try:
        yield fake
    finally:
        fake.close()
