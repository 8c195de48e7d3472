"""A vendor failure is contained: its cards go Unhealthy, the other backends' pools carry on."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    Health,
    HealthEvent,
    Inventory,
    LinkMatrix,
    NotSupportedError,
    Partition,
    Unit,
)
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


class CrashingVendor:
    """A stand-in vendor whose library dies at run time (its health stream raises) and comes back."""

    name = "crashing"

    def __init__(self) -> None:
        self.crash = threading.Event()
        self.crashes = 0
        self._lock = threading.Lock()

    def discover(self) -> Inventory:
        return Inventory(
            cards=(Card(id="X-0", backend=self.name, vendor="x", model="X1", index=9, numa_node=0),)
        )

    def health_events(self) -> Iterator[HealthEvent]:
        while not self.crash.wait(0.05):
            pass
        with self._lock:
            self.crash.clear()
            self.crashes += 1
        raise OSError("vendor library stopped answering")
        yield  # pragma: no cover  (makes this a generator)

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        return ContainerEdits(env={"X_VISIBLE": ",".join(u.card_id for u in units)})

    def links(self) -> LinkMatrix:
        return LinkMatrix()

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        raise NotSupportedError("no partitions")


def test_failing_vendor_marks_only_its_cards_unhealthy_then_recovers(node: Node) -> None:
    vendor = CrashingVendor()
    node.write_pools(pool_doc(card_pool("x", "X-0"), card_pool("gpu", H100[0])))
    daemon = node.start_daemon(extra_backends={vendor.name: vendor})
    node.wait_registered("x", "gpu")
    assert node.kubelet.resource(resource("x")).healthy == {"X-0"}
    record = node.kubelet.allocate("p", "c", resource("x"), 1)
    assert record.response.envs["X_VISIBLE"] == "X-0"

    gpu_snapshots = node.kubelet.resource(resource("gpu")).snapshots
    vendor.crash.set()
    # Marked Unhealthy, then rediscovered after back-off: the stream reports both transitions.
    node.kubelet.wait_for(lambda k: k.resource(resource("x")).snapshots >= 3, WAIT, "down and up again")
    node.kubelet.wait_for(lambda k: k.resource(resource("x")).healthy == {"X-0"}, WAIT, "recovered")
    view = daemon.view()
    assert "crashing" not in view.failed_backends
    assert node.kubelet.resource(resource("gpu")).snapshots == gpu_snapshots
    assert node.kubelet.resource(resource("gpu")).healthy == {H100[0]}
    assert all(c.health is Health.HEALTHY for c in view.cards)
