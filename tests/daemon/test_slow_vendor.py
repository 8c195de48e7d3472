"""A vendor call that hangs delays nothing else: not health, not other pools, not views or stop.

The simulated backend stands in for the hardware; only its ``partition`` is held on a gate, as a
vendor library stuck in a MIG or vNPU call would be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence

import pytest

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    Health,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    Partition,
    Unit,
)
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource
from vendors.simulated import SimulatedBackend

MIG_CARD = H100[3]


class StuckPartition:
    """The simulated backend, with ``partition`` blocked until ``gate`` opens."""

    def __init__(self, inner: SimulatedBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.gate = threading.Event()
        self.entered = threading.Event()

    def discover(self) -> Inventory:
        return self.inner.discover()

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        return self.inner.health_events()

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        return self.inner.container_edits(units, options)

    def links(self) -> LinkMatrix:
        return self.inner.links()

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        self.entered.set()
        self.gate.wait(WAIT * 3)
        return self.inner.partition(card, profile, count)


def call_within(seconds: float, fn: object) -> bool:
    done = threading.Event()

    def run() -> None:
        fn()  # type: ignore[operator]
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(seconds)


MIG_POOL = {"name": "mig", "unit": "Partition", "profile": "3g.40gb", "devices": [{"uuid": MIG_CARD}]}


@pytest.fixture
def stuck(node: Node) -> Iterator[StuckPartition]:
    """A daemon serving pool a and a MIG pool whose layout is stuck inside ``partition``."""
    backend = StuckPartition(node.backend)
    node.backend = backend  # type: ignore[assignment]
    node.write_pools(pool_doc(card_pool("a", H100[0]), MIG_POOL))
    node.start_daemon()
    try:
        assert backend.entered.wait(WAIT), "the layout started"
        node.wait_registered("a")
        yield backend
    finally:
        backend.gate.set()


def test_a_stuck_partition_call_holds_back_only_its_own_layout(node: Node, stuck: StuckPartition) -> None:
    daemon = node.daemon
    assert daemon is not None
    # Views, and so probes and metrics, answer while the vendor call hangs.
    assert call_within(1.0, daemon.view)

    # A health event reaches kubelet.
    stuck.inner.inject(HealthEvent(H100[0], Health.UNHEALTHY, "xid 79"))
    node.kubelet.wait_for(lambda k: k.resource(resource("a")).unhealthy == {H100[0]}, WAIT, "unhealthy")

    # A pool change elsewhere applies.
    node.write_pools(pool_doc(card_pool("a", H100[0], H100[1]), MIG_POOL))
    node.kubelet.wait_for(lambda k: H100[1] in k.resource(resource("a")).healthy, WAIT, "card added")
    assert not stuck.gate.is_set()

    stuck.gate.set()

    def laid_out(v: DaemonView) -> bool:
        return "mig" in v.pools and len(v.pools["mig"].units) == 2

    daemon.wait_for(laid_out, WAIT, "the layout lands once the vendor answers")


def test_stop_is_quick_while_a_vendor_call_hangs(node: Node, stuck: StuckPartition) -> None:
    daemon = node.daemon
    assert daemon is not None
    began = time.monotonic()
    daemon.stop()
    node.daemon = None
    assert time.monotonic() - began < 1.0, "stop did not wait for the vendor"
    assert not (node.plugin_dir / "hcs-gpu.deckhouse.io_a.sock").exists()
    assert not stuck.gate.is_set()
