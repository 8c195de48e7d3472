"""The daemon with the DRA front end, end to end on real sockets: a DRA pool is published as a
ResourceSlice and never as a device plugin resource; a claim prepared through the DRA kubelet
simulator holds its card; a held card changing front end drains first, both ways; a health change
taints the device in the slice and reaches kubelet's health stream; a daemon restart between
Prepare and Unprepare keeps the hold."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hcs_deviceplugin.daemon import Daemon, DaemonConfig, DaemonView
from hcs_deviceplugin.dra.claims import ApiClaimSource
from hcs_deviceplugin.dra.devices import dra_device_name
from hcs_deviceplugin.dra.frontend import DraConfig, DraSetup
from hcs_deviceplugin.dra.slices import SliceApi
from hcs_deviceplugin.kubeletsim.dra import DraKubeletSimulator
from hcs_deviceplugin.kubeletsim.drahealth import HealthWatch
from hcs_deviceplugin.model import Health, HealthEvent
from hcs_deviceplugin.observability.probes import readiness
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from tests.cdi.runtime import CdiRegistry
from tests.dra.rig import claim_object
from tests.dra.sliceschema import problems
from tests.integration.conftest import H100, WAIT, Node, card_pool, fresh_node, pool_doc, resource
from tests.pools.fakeapiserver import FakeApiServer

DRIVER = "gpu.deckhouse.io"


@dataclass
class DraNode:
    node: Node
    api: FakeApiServer
    kubelet: DraKubeletSimulator

    def start(self) -> Daemon:
        root = self.node.root
        daemon = Daemon(
            DaemonConfig(
                plugin_dir=self.node.plugin_dir,
                node_name="node-1",
                backend_retry=Backoff(initial=0.05, maximum=0.2),
                registration_backoff=Backoff(initial=0.02, maximum=0.2),
                pod_resources_socket=root / "pr.sock",
                pod_resources_interval=0.1,
                allocation_settle_seconds=0.3,
                cdi_dir=root / "cdi",
                state_dir=root / "state",
            ),
            {self.node.backend.name: self.node.backend},
            dra=DraSetup(
                DraConfig(DRIVER, root / "state", root / "plugins", root / "plugins_registry"),
                ApiClaimSource(self.api.api_client()),
                SliceApi(self.api.api_client()),
            ),
        )
        daemon.add_source(lambda on_change: DirectoryPoolSource(self.node.pools_dir, on_change))
        daemon.start()
        self.node.daemon = daemon
        return daemon

    def restart(self) -> Daemon:
        assert self.node.daemon is not None
        self.node.daemon.stop()
        self.kubelet.forget(DRIVER)
        return self.start()

    def slice_devices(self) -> dict[str, dict[str, Any]]:
        return {d["name"]: d for s in self.api.resource_slices().values() for d in s["spec"]["devices"]}

    def wait_slice(self, predicate: Any, what: str) -> None:
        def check(slices: dict[str, Any]) -> bool:
            return bool(predicate({d["name"]: d for s in slices.values() for d in s["spec"]["devices"]}))

        assert self.api.wait_resource_slices(check, WAIT), what

    def claim(self, name: str, card: str) -> tuple[str, str, str]:
        stored = self.api.put_resource_claim(claim_object("default", name, [dra_device_name(card)]))
        stored["status"]["allocation"]["devices"]["results"][0]["pool"] = "node-1"
        stored = self.api.put_resource_claim(stored)
        return "default", stored["metadata"]["uid"], name

    def view(self, predicate: Any, what: str) -> DaemonView:
        assert self.node.daemon is not None
        return self.node.daemon.wait_for(predicate, WAIT, what)


@pytest.fixture
def dra() -> Iterator[DraNode]:
    with fresh_node() as node, FakeApiServer() as api:
        api.slice_validator = problems
        with DraKubeletSimulator(node.root / "plugins_registry") as kubelet:
            yield DraNode(node, api, kubelet)
            if node.daemon is not None:
                node.daemon.stop()
                node.daemon = None
        shutil.rmtree(node.root / "cdi", ignore_errors=True)


def test_a_dra_pool_is_a_resource_slice_and_never_a_device_plugin_resource(dra: DraNode) -> None:
    dra.node.write_pools(pool_doc(card_pool("dp", H100[0]), card_pool("claims", H100[1], H100[2], api="dra")))
    dra.start()
    dra.node.wait_registered("dp")
    dra.kubelet.wait_registered(DRIVER, WAIT)
    dra.wait_slice(lambda d: set(d) == {dra_device_name(H100[1]), dra_device_name(H100[2])}, "slice of 2")
    assert resource("claims") not in dra.node.kubelet.resources()
    assert dra.node.kubelet.resource(resource("dp")).healthy == {H100[0]}
    # registered at kubelet comes a moment before the daemon records it: wait for readiness itself
    dra.view(lambda v: "dp" in v.pools and readiness(v)[0], "dp served and the daemon ready")


def test_a_slice_the_apiserver_refuses_makes_the_daemon_unready_and_says_why(dra: DraNode) -> None:
    dra.api.slice_validator = lambda _body: ["injected refusal"]
    dra.node.write_pools(pool_doc(card_pool("claims", H100[1], api="dra")))
    dra.start()
    view = dra.view(lambda v: bool(v.dra_problem), "the slice write failed")
    ready, reasons = readiness(view)
    assert not ready and any(r.startswith("dra: ResourceSlice write failed") for r in reasons), reasons
    dra.api.slice_validator = problems
    dra.wait_slice(lambda d: dra_device_name(H100[1]) in d, "the retry writes it")
    assert readiness(dra.view(lambda v: not v.dra_problem, "recovered"))[0]


def test_a_claimed_card_drains_before_a_device_plugin_pool_gets_it_and_back(dra: DraNode) -> None:
    dra.node.write_pools(pool_doc(card_pool("dp", H100[0]), card_pool("claims", H100[1], api="dra")))
    daemon = dra.start()
    dra.node.wait_registered("dp")
    dra.kubelet.wait_registered(DRIVER, WAIT)
    dra.wait_slice(lambda d: dra_device_name(H100[1]) in d, "claims published")
    ref = dra.claim("train", H100[1])
    answer = dra.kubelet.prepare(DRIVER, [ref]).claims[ref[1]]
    assert answer.error == ""
    CdiRegistry.load(dra.node.root / "cdi").resolve(answer.devices[0].cdi_device_ids)
    dra.view(lambda v: H100[1] in v.held, "the prepared card counts as held")

    dra.node.write_pools(pool_doc(card_pool("dp", H100[0], H100[1]), card_pool("claims", api="dra")))
    dra.view(lambda v: H100[1] in v.draining, "held by a claim: drains, not advertised")
    assert H100[1] not in dra.node.kubelet.resource(resource("dp")).healthy
    dra.wait_slice(lambda d: not d, "gone from the slice at once")

    dra.restart()  # between Prepare and Unprepare: the checkpoint keeps the hold
    dra.kubelet.wait_registered(DRIVER, WAIT)
    dra.view(lambda v: H100[1] in v.draining, "still held after the restart")
    assert dra.kubelet.unprepare(DRIVER, [ref]).claims[ref[1]].error == ""
    dra.node.kubelet.wait_for(
        lambda k: H100[1] in k.resource(resource("dp")).healthy,
        WAIT,
        "released: the device plugin pool gets it",
    )
    assert daemon is not dra.node.daemon


def test_a_pod_held_card_drains_before_the_dra_pool_publishes_it(dra: DraNode) -> None:
    dra.node.write_pools(pool_doc(card_pool("dp", H100[0]), card_pool("claims", H100[1], api="dra")))
    dra.start()
    dra.node.wait_registered("dp")
    dra.node.kubelet.allocate("pod-a", "main", resource("dp"), 1)
    dra.view(lambda v: H100[0] in v.held, "pod-resources lists the allocation")
    dra.node.write_pools(pool_doc(card_pool("dp"), card_pool("claims", H100[0], H100[1], api="dra")))
    dra.view(lambda v: H100[0] in v.draining, "held by a pod: drains")
    dra.wait_slice(lambda d: set(d) == {dra_device_name(H100[1])}, "not published while held")
    dra.node.kubelet.free_pod("pod-a")
    dra.wait_slice(lambda d: dra_device_name(H100[0]) in d, "published once released")


def test_a_health_change_taints_the_device_in_the_slice(dra: DraNode) -> None:
    dra.node.write_pools(pool_doc(card_pool("claims", H100[0], H100[1], api="dra")))
    dra.start()
    sick = dra_device_name(H100[0])
    dra.wait_slice(lambda d: sick in d and "taints" not in d[sick], "healthy first")
    key = ("node-1", sick)
    with HealthWatch(dra.kubelet.wait_registered(DRIVER, WAIT)) as watch:
        watch.wait_for(lambda h: h.get(key) == "HEALTHY", WAIT)
        dra.node.backend.inject(HealthEvent(H100[0], Health.UNHEALTHY, "xid 79"))
        dra.wait_slice(lambda d: d[sick].get("taints", [{}])[0].get("effect") == "NoSchedule", "tainted")
        watch.wait_for(lambda h: h.get(key) == "UNHEALTHY", WAIT)
        ref = dra.claim("late", H100[0])
        assert "unhealthy" in dra.kubelet.prepare(DRIVER, [ref]).claims[ref[1]].error
        dra.node.backend.inject(HealthEvent(H100[0], Health.HEALTHY, "recovered"))
        dra.wait_slice(lambda d: "taints" not in d[sick], "taint removed on recovery")
        watch.wait_for(lambda h: h.get(key) == "HEALTHY", WAIT)
