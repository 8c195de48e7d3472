"""A backend that sees new hardware asks for rediscovery; the daemon adds the card to its pool live."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping, Sequence

from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    NotSupportedError,
    Partition,
    Unit,
)
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


class HotplugVendor:
    """A stand-in vendor whose card Y-1 is plugged in while the daemon runs."""

    name = "hotplug"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cards = ["Y-0"]
        self.events: queue.Queue[HealthEvent | InventoryChanged] = queue.Queue()
        self.discoveries = 0
        self.stop = threading.Event()

    def plug(self, card_id: str) -> None:
        with self.lock:
            self.cards.append(card_id)
        self.events.put(InventoryChanged(f"{card_id} appeared"))

    def discover(self) -> Inventory:
        with self.lock:
            self.discoveries += 1
            ids = list(self.cards)
        return Inventory(
            cards=tuple(
                Card(id=i, backend=self.name, vendor="y", model="Y1", index=n, numa_node=0)
                for n, i in enumerate(ids)
            )
        )

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        while not self.stop.is_set():
            try:
                yield self.events.get(timeout=0.05)
            except queue.Empty:
                continue

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        return ContainerEdits(env={"Y_VISIBLE": ",".join(u.card_id for u in units)})

    def links(self) -> LinkMatrix:
        return LinkMatrix()

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        raise NotSupportedError("no partitions")


def test_inventory_changed_rediscovers_and_the_new_card_joins_its_pool(node: Node) -> None:
    vendor = HotplugVendor()
    # The control plane already lists Y-1 (say, from a hardware inventory); it is absent until plugged in.
    node.write_pools(pool_doc(card_pool("y", "Y-0", "Y-1"), card_pool("gpu", H100[0])))
    node.start_daemon(extra_backends={vendor.name: vendor})
    try:
        node.wait_registered("y", "gpu")
        assert node.kubelet.resource(resource("y")).healthy == {"Y-0"}
        gpu_snapshots = node.kubelet.resource(resource("gpu")).snapshots
        vendor.plug("Y-1")
        node.kubelet.wait_for(
            lambda k: k.resource(resource("y")).healthy == {"Y-0", "Y-1"}, WAIT, "hot-added card advertised"
        )
        assert vendor.discoveries == 2
        record = node.kubelet.allocate("p", "c", resource("y"), 2)
        assert sorted(record.response.envs["Y_VISIBLE"].split(",")) == ["Y-0", "Y-1"]
        assert node.kubelet.resource(resource("gpu")).snapshots == gpu_snapshots
    finally:
        vendor.stop.set()
