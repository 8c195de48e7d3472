"""The scripted scenario ``simulate`` plays: pools from the inventory, pods, a failure, a live change.

Pools are derived from the data alone (cards grouped by their vendor label), so the core still
knows no vendor: whatever node description is given, the same story is told. Every step waits on
an observable condition (the kubelet simulator's view) with a bounded timeout, so the scenario is
also an end-to-end check: ``simulate --once`` fails if any step does not happen.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from hcs_deviceplugin.daemon import Daemon
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.dra import DraKubeletSimulator
from hcs_deviceplugin.model import Card, DeviceDelivery, Health, HealthEvent, Inventory
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from hcs_deviceplugin.simulation.dra import MemoryClaims, MemorySlices

STEP_TIMEOUT = 15.0
POOLS_KEY = "pools.yaml"


class HealthInjector(Protocol):
    """What the simulated backend offers beyond the Backend interface: scripted faults."""

    def inject(self, event: HealthEvent) -> None: ...


def _label(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "pool"


def initial_pools(inventory: Inventory, dra: bool = False) -> dict[str, Any]:
    """A native pools document: per vendor label, a Partition pool for partitioned cards, and the
    rest split into an exclusive ``-train`` pool and a 4-way time-sliced ``-shared`` pool. The
    ``-shared`` pools hand their devices over as CDI names (``deviceDelivery: cdi-cri``). With
    ``dra``, the last small pool (fewer than 3 whole cards) is served through DRA (``-dra``)."""
    groups: dict[str, list[Card]] = {}
    for card in sorted(inventory.cards, key=lambda c: c.index):
        groups.setdefault(_label(card.vendor), []).append(card)
    profiles = {p.card_id: p.profile for p in inventory.partitions}
    pools: list[dict[str, Any]] = []
    for label, cards in sorted(groups.items()):
        partitioned = [c for c in cards if c.id in profiles]
        whole = [c for c in cards if c.id not in profiles]
        if partitioned:
            pools.append(
                {
                    "name": f"{label}-partitions",
                    "unit": "Partition",
                    "profile": profiles[partitioned[0].id],
                    "devices": [{"uuid": c.id} for c in partitioned],
                }
            )
        if len(whole) >= 3:
            half = (len(whole) + 1) // 2
            pools.append({"name": f"{label}-train", "devices": [{"uuid": c.id} for c in whole[:half]]})
            pools.append(
                {
                    "name": f"{label}-shared",
                    "slicesPerUnit": 4,
                    "deviceDelivery": DeviceDelivery.CDI_CRI.value,
                    "devices": [{"uuid": c.id} for c in whole[half:]],
                }
            )
        elif whole:
            pools.append({"name": label, "devices": [{"uuid": c.id} for c in whole]})
    small = [
        p for p in pools if "unit" not in p and "slicesPerUnit" not in p and not p["name"].endswith("-train")
    ]
    if dra and small:
        small[-1]["name"] += "-dra"
        small[-1]["api"] = "dra"
    return {"version": "v1", "pools": pools}


@dataclass
class DraStage:
    """What the scenario needs to show the DRA pool: kubelet's DRA side and the API stand-ins."""

    kubelet: DraKubeletSimulator
    claims: MemoryClaims
    slices: MemorySlices
    driver: str
    node: str


@dataclass
class Scenario:
    """Runs the steps; ``log`` collects one line per step for the view."""

    daemon: Daemon
    kubelet: KubeletSimulator
    injector: HealthInjector
    pools_dir: Path
    pause: Callable[[], None] = lambda: None
    log: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    document: dict[str, Any] = field(default_factory=dict)
    dra: DraStage | None = None

    def say(self, line: str) -> None:
        with self.lock:
            self.log.append(line)

    def write_pools(self) -> None:
        write_configmap_volume(self.pools_dir, {POOLS_KEY: yaml.safe_dump(self.document, sort_keys=False)})

    def resource_of(self, pool_name: str) -> str:
        return self.daemon.view().pools[pool_name].pool.resource_name

    def run(self) -> None:
        view = self.daemon.wait_for(
            lambda v: bool(v.pools) and v.all_registered(), STEP_TIMEOUT, "every pool registered"
        )
        names = sorted(view.pools)
        self.kubelet.wait_for(
            lambda k: all(k.resource(self.resource_of(n)).connected for n in names),
            STEP_TIMEOUT,
            "kubelet to receive every pool's first device list",
        )
        self.say(f"1. daemon up: {len(names)} pools registered ({', '.join(names)})")
        self.pause()

        train = next((n for n in names if n.endswith("-train")), names[0])
        shared = next((n for n in names if n.endswith("-shared")), None)
        pods = 0
        for name in names:
            count = 3 if name == shared else 1
            for i in range(count):
                self.kubelet.allocate(f"{name}-pod-{i}", "main", self.resource_of(name), 1)
                pods += 1
        self.say(f"2. {pods} pods allocated through GetPreferredAllocation + Allocate")
        self._check_cdi_names()
        self._prepare_a_claim()
        self.pause()

        victim = self.daemon.view().pools[train].units[0]
        resource = self.resource_of(train)
        self.injector.inject(HealthEvent(victim.card_id, Health.UNHEALTHY, "simulated critical fault"))
        self.kubelet.wait_for(
            lambda k: victim.id in k.resource(resource).unhealthy, STEP_TIMEOUT, f"{victim.id} unhealthy"
        )
        self.say(f"3. card {victim.card_id} failed (critical fault): kubelet sees {victim.id} Unhealthy")
        self.pause()

        self.injector.inject(HealthEvent(victim.card_id, Health.HEALTHY, "recovered"))
        self.kubelet.wait_for(
            lambda k: victim.id in k.resource(resource).healthy, STEP_TIMEOUT, f"{victim.id} healthy"
        )
        self.say(f"4. card {victim.card_id} recovered: Healthy again")
        self.pause()

        if shared is not None:
            self._move_free_card(train, shared)
            self.pause()

    def _check_cdi_names(self) -> None:
        """Every CDI name an Allocate answer gave is in a spec file the daemon wrote."""
        publisher = self.daemon.cdi
        named = [(r, [d.name for d in r.response.cdi_devices]) for r in self.kubelet.allocations()]
        named = [(r, names) for r, names in named if names]
        if publisher is None or not named:
            return
        missing = sorted({n for _, names in named for n in names} - publisher.names)
        if missing:
            raise RuntimeError(f"Allocate named CDI devices that no spec defines: {missing}")
        record, names = named[0]
        self.say(
            f"2b. {len(named)} CDI answers resolve in {publisher.files.directory}: "
            f"{record.pod} got {', '.join(names)}"
        )

    def _prepare_a_claim(self) -> None:
        """The DRA pool: its devices in the slice, one claimed, prepared, and its card held."""
        pool = next((p for p in self.document["pools"] if p.get("api") == "dra"), None)
        if self.dra is None or pool is None:
            return
        stage = self.dra
        if not stage.slices.wait_devices(len(pool["devices"]), STEP_TIMEOUT):
            raise RuntimeError(
                f"the ResourceSlice never showed the {len(pool['devices'])} devices of {pool['name']}"
            )
        registration = stage.kubelet.wait_registered(stage.driver, STEP_TIMEOUT)
        device = sorted(stage.slices.devices())[0]
        ref = stage.claims.allocate("default", f"{pool['name']}-claim", stage.driver, stage.node, [device])
        answer = stage.kubelet.prepare(stage.driver, [ref]).claims[ref[1]]
        if answer.error:
            raise RuntimeError(f"NodePrepareResources refused {ref[2]}: {answer.error}")
        ids = [i for d in answer.devices for i in d.cdi_device_ids]
        publisher = self.daemon.cdi
        if publisher is not None and not set(ids) <= publisher.names:
            raise RuntimeError(f"Prepare named CDI devices that no spec defines: {ids}")
        card = str(stage.slices.devices()[device]["attributes"]["uuid"]["string"])
        self.daemon.wait_for(lambda v: card in v.held, STEP_TIMEOUT, f"{card} held by the claim")
        self.say(
            f"2c. DRA pool {pool['name']}: {len(pool['devices'])} devices in this node's ResourceSlice "
            f"(driver {stage.driver}, registered over {registration.service}); claim {ref[2]} prepared: "
            f"{', '.join(ids)}; card held"
        )

    def _move_free_card(self, source: str, target: str) -> None:
        held = {d for r in self.kubelet.allocations() for d in r.device_ids}
        view = self.daemon.view()
        free = [u.card_id for u in view.pools[source].units if u.id not in held]
        if not free:
            self.say(f"5. skipped: every card of {source} is in use")
            return
        card_id = free[-1]
        pools = self.document["pools"]
        src = next(p for p in pools if p["name"] == source)
        dst = next(p for p in pools if p["name"] == target)
        src["devices"] = [d for d in src["devices"] if d.get("uuid") != card_id]
        dst["devices"].append({"uuid": card_id})
        before = len(view.pools[target].units)
        self.write_pools()
        resource = self.resource_of(target)
        self.kubelet.wait_for(
            lambda k: len(k.resource(resource).healthy) > before, STEP_TIMEOUT, f"{target} to grow"
        )
        self.say(f"5. pool change applied live: card {card_id} moved {source} -> {target}")
        record = self.kubelet.allocate(f"{target}-pod-new", "main", resource, 1)
        where = ", ".join(record.device_ids)
        on_moved = any(d.split("::")[0] == card_id for d in record.device_ids)
        self.say(
            f"6. a new pod got {where} in {target}"
            + (" (the least-loaded card: the one just moved)" if on_moved else "")
        )
