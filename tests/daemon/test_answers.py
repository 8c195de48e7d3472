"""Allocate answers kept with a pool's snapshot are dropped when a backend rediscovers its devices.

The unit list may stay the same while what a container needs changes (a driver reload renumbers the
device nodes), so the daemon must not keep answering from before the rediscovery. The backend here is
the simulated one, with its edits marked by how many discoveries it has made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    Partition,
    Unit,
)
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc
from vendors.simulated import SimulatedBackend

DISCOVERY_ENV = "TEST_DISCOVERY"


class Rediscovering:
    """The simulated backend; its edits name its discovery count, ``rediscover`` asks for one more."""

    def __init__(self, inner: SimulatedBackend, stop: threading.Event) -> None:
        self.inner = inner
        self.name = inner.name
        self.discoveries = 0
        self.rediscover = threading.Event()
        self._stop = stop

    def discover(self) -> Inventory:
        self.discoveries += 1
        return self.inner.discover()

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        while not self._stop.is_set():
            if self.rediscover.wait(0.05):
                self.rediscover.clear()
                yield InventoryChanged("test: driver reloaded")

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        edits = self.inner.container_edits(units, options)
        return replace(edits, env={**edits.env, DISCOVERY_ENV: str(self.discoveries)})

    def links(self) -> LinkMatrix:
        return self.inner.links()

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        return self.inner.partition(card, profile, count)


def test_a_rediscovery_under_an_unchanged_list_is_answered_with_the_new_edits(node: Node) -> None:
    backend = Rediscovering(node.backend, node.stop_event)
    node.backend = backend  # type: ignore[assignment]
    node.write_pools(pool_doc(card_pool("a", H100[0])))
    daemon = node.start_daemon()
    node.wait_registered("a")
    request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[H100[0]])])
    with grpc.insecure_channel(f"unix:{daemon.server('a').socket_path}") as channel:
        stub = pb_grpc.DevicePluginStub(channel)

        def discovery_named() -> str:
            response = stub.Allocate(request, timeout=WAIT)
            return response.container_responses[0].envs[DISCOVERY_ENV]

        assert discovery_named() == "1"
        assert discovery_named() == "1"  # kept with the snapshot
        backend.rediscover.set()
        deadline = time.monotonic() + WAIT
        while discovery_named() != "2":
            assert time.monotonic() < deadline, "Allocate still answers from before the rediscovery"
            time.sleep(0.01)
        assert [u.id for u in daemon.view().pools["a"].units] == [H100[0]]  # the same list throughout
