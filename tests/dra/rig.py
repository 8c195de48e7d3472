"""A DRA node for tests: the simulated backend's inventory, one DRA pool, the real CDI publisher, the
fake apiserver serving ResourceClaims, and the DRA plugin on real unix sockets with the DRA kubelet
simulator dialling back. Nothing of ours is replaced."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.cdi.publisher import CdiPublisher
from hcs_deviceplugin.dra.checkpoint import ClaimCheckpoint
from hcs_deviceplugin.dra.claims import ApiClaimSource
from hcs_deviceplugin.dra.devices import DraDevice, slice_devices
from hcs_deviceplugin.dra.health import HealthFeed
from hcs_deviceplugin.dra.preparer import ClaimPreparer
from hcs_deviceplugin.dra.server import DraPluginServer
from hcs_deviceplugin.kubeletsim.dra import DraKubeletSimulator
from hcs_deviceplugin.model import DeviceSelector, Health, Inventory, Pool, PoolApi, PoolSet
from hcs_deviceplugin.reconciler import desired_state, dra_pools
from tests.pools.fakeapiserver import FakeApiServer
from vendors.simulated import create_backend

DRIVER = "gpu.deckhouse.io"
NODE = "node-a"


def dra_pool(name: str, card_ids: Sequence[str]) -> Pool:
    return Pool(
        name=name,
        resource_name=f"gpu.deckhouse.io/{name}",
        devices=tuple(DeviceSelector(uuid=c) for c in card_ids),
        api=PoolApi.DRA,
    )


def claim_object(namespace: str, name: str, devices: Sequence[str], request: str = "gpu") -> dict[str, Any]:
    results = [{"request": request, "driver": DRIVER, "pool": NODE, "device": d} for d in devices]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": "team-a"}}]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


@dataclass
class Rig:
    root: Path
    api: FakeApiServer
    inventory: Inventory
    publisher: CdiPublisher
    devices: tuple[DraDevice, ...]
    kubelet: DraKubeletSimulator
    preparer: ClaimPreparer | None = None
    server: DraPluginServer | None = None
    health: HealthFeed = field(default_factory=lambda: HealthFeed(NODE))

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    def start_plugin(self) -> DraPluginServer:
        """A fresh preparer (reading the checkpoint) and server, as after a daemon (re)start."""
        self.preparer = ClaimPreparer(
            DRIVER,
            NODE,
            ApiClaimSource(self.api.api_client()),
            ClaimCheckpoint(self.root / "state"),
            self.ensure_cdi,
        )
        self.preparer.set_devices(self.devices)
        self.health.publish(self.devices)
        self.server = DraPluginServer(
            DRIVER, self.root / "plugins", self.root / "plugins_registry", self.preparer, self.health
        )
        self.server.start()
        return self.server

    def stop_plugin(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        self.kubelet.forget(DRIVER)

    def ensure_cdi(self, devices: Sequence[DraDevice]) -> str:
        missing = [d.cdi_name for d in devices if d.cdi_name not in self.publisher.names]
        return f"CDI spec does not name {missing}" if missing else ""

    def put_claim(
        self, name: str, devices: Sequence[str], namespace: str = "default"
    ) -> tuple[str, str, str]:
        stored = self.api.put_resource_claim(claim_object(namespace, name, devices))
        return namespace, stored["metadata"]["uid"], name

    def set_health(self, card_id: str, health: Health) -> None:
        self.devices = compute_devices(self.inventory, self.publisher, {card_id: health})
        assert self.preparer is not None
        self.preparer.set_devices(self.devices)
        self.health.publish(self.devices)


def compute_devices(
    inventory: Inventory, publisher: CdiPublisher, health: dict[str, Health] | None = None
) -> tuple[DraDevice, ...]:
    pools = PoolSet((dra_pool("team-a", [c.id for c in inventory.cards]),))
    desired = desired_state(pools, inventory, NODE, health=health or {})
    return slice_devices(dra_pools(desired.pools), inventory, health or {}, publisher.kinds)


@contextmanager
def dra_rig() -> Iterator[Rig]:
    # Short root: unix socket paths must fit in 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="dra", dir="/tmp"))
    backend = create_backend(BackendConfig(options={"node": "builtin:default"}))
    inventory = backend.discover()
    publisher = CdiPublisher(root / "cdi", {"simulated": backend}, lambda _: Path("/"))
    assert publisher.publish(inventory)
    with FakeApiServer() as api, DraKubeletSimulator(root / "plugins_registry") as kubelet:
        rig = Rig(root, api, inventory, publisher, compute_devices(inventory, publisher), kubelet)
        try:
            yield rig
        finally:
            rig.stop_plugin()
            shutil.rmtree(root, ignore_errors=True)
