"""Fixtures: a short socket dir under /tmp (unix paths are limited to 107 bytes), a running simulator
and a factory for fake plugins living in the simulator's device-plugin dir."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from tests.kubeletsim.fakeplugin import FakePlugin

RESOURCE = "hcs.example.com/fake"
PLUGIN_DIR = "dp"

PluginFactory = Callable[..., FakePlugin]
SimFactory = Callable[..., KubeletSimulator]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ks", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sim_factory(sock_dir: Path) -> Iterator[SimFactory]:
    """Build, start (and later stop) simulators on the shared dirs."""
    made: list[KubeletSimulator] = []

    def make(
        grace_period: float = 300.0, use_preferred_allocation: bool = True, dial_timeout: float = 2.0
    ) -> KubeletSimulator:
        sim = KubeletSimulator(
            sock_dir / PLUGIN_DIR,
            pod_resources_socket=sock_dir / "pr" / "kubelet.sock",
            grace_period=grace_period,
            use_preferred_allocation=use_preferred_allocation,
            dial_timeout=dial_timeout,
        )
        made.append(sim)
        sim.start()
        return sim

    yield make
    for sim in made:
        sim.stop()


@pytest.fixture
def sim(sim_factory: SimFactory) -> KubeletSimulator:
    return sim_factory()


@pytest.fixture
def make_plugin(sock_dir: Path) -> Iterator[PluginFactory]:
    """Serve fake plugins in the simulators' plugin dir (start the simulator first: it wipes sockets)."""
    made: list[FakePlugin] = []

    def make(
        socket_name: str = "fake.sock",
        options: dp.DevicePluginOptions | None = None,
        initial: Sequence[dp.Device] = (),
    ) -> FakePlugin:
        plugin = FakePlugin(sock_dir / PLUGIN_DIR, socket_name, options, initial).serve()
        made.append(plugin)
        return plugin

    yield make
    for plugin in made:
        plugin.stop()


def registered(
    sim: KubeletSimulator, plugin: FakePlugin, resource: str = RESOURCE, snapshots: int = 1
) -> None:
    """Register ``plugin`` and wait until kubelet has consumed ``snapshots`` more snapshots of it."""
    before = sim.resources()[resource].snapshots if resource in sim.resources() else 0
    plugin.register(sim.kubelet_socket, resource)
    sim.wait_for(
        lambda s: s.resource(resource).snapshots >= before + snapshots,
        what=f"{snapshots} snapshot(s) of {resource}",
    )
