"""The Hygon backend through the whole daemon: a generated sysfs tree, real sockets, the kubelet simulator.

The node is ``xgmi_node(8, hives=2)``: two xGMI hives of four that interleave the two PCIe switches,
so a 4-card request that stays on one switch (what a PCIe-only or sorted-order choice takes) is
not connected, and only an xGMI-aware preferred allocation passes. Health runs on the sysfs re-scan
(``udev=off``, 50 ms), so a hot-removal in the tree reaches the kubelet as Unhealthy and its return
as Healthy.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.model import Card, LinkKind
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, card_pool, pool_doc, resource
from vendors.hygon import HygonBackend, create_backend
from vendors.hygon.fake import FakeHygonNode, write_hygon_node, xgmi_node


@dataclass
class HygonNode:
    root: Path
    fake: FakeHygonNode
    backend: HygonBackend
    cards: list[Card]
    kubelet: KubeletSimulator
    stop: threading.Event


@pytest.fixture
def hygon_node() -> Iterator[HygonNode]:
    root = Path(tempfile.mkdtemp(prefix="hcsh", dir="/tmp"))
    stop = threading.Event()
    fake = write_hygon_node(root / "host", xgmi_node(8, hives=2))
    backend = create_backend(
        BackendConfig(host_root=fake.host_root, options={"udev": "off", "rescanSeconds": "0.05"}, stop=stop)
    )
    cards = list(backend.discover().cards)
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    try:
        yield HygonNode(root, fake, backend, cards, kubelet, stop)
    finally:
        stop.set()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def running_daemon(node: HygonNode, *pools: dict[str, Any]) -> Iterator[Daemon]:
    write_configmap_volume(node.root / "pools", {"pools.yaml": pool_doc(*pools)})
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=node.root / "dp", node_name="node-1", registration_backoff=Backoff(0.02, 0.2)
        ),
        {node.backend.name: node.backend},
    )
    daemon.add_source(lambda cb: DirectoryPoolSource(node.root / "pools", cb))
    daemon.start()
    try:
        yield daemon
    finally:
        node.stop.set()  # ends the backend's health stream, as the daemon's shutdown does
        daemon.stop()


def test_dcu_pool_allocates_a_connected_four_and_the_right_nodes(hygon_node: HygonNode) -> None:
    node = hygon_node
    ids = [c.id for c in node.cards]
    by_id = {c.id: c for c in node.cards}
    dcu = resource("dcu")
    with running_daemon(node, card_pool("dcu", *ids)):
        node.kubelet.wait_for(lambda k: dcu in k.resources() and k.resource(dcu).connected, WAIT, "up")
        assert node.kubelet.resource(dcu).healthy == set(ids)

        four = node.kubelet.allocate("train", "main", dcu, 4)
        links = node.backend.links()
        assert all(
            any(link.kind == LinkKind.XGMI for link in links.between(a, b))
            for a, b in combinations(four.device_ids, 2)
        ), f"{four.device_ids} is not one xGMI hive"
        assert sorted(four.device_ids) != sorted(ids)[:4], "the sorted-order choice would not be connected"
        assert four.response.envs["HIP_VISIBLE_DEVICES"] == "0,1,2,3"

        one = node.kubelet.allocate("infer", "main", dcu, 1)
        card = by_id[one.device_ids[0]]
        minor, render = card.attributes["drmCardMinor"], card.attributes["drmRenderMinor"]
        assert [(d.container_path, d.host_path, d.permissions) for d in one.response.devices] == [
            ("/dev/kfd", "/dev/kfd", "rw"),
            ("/dev/mkfd", "/dev/mkfd", "rw"),
            (f"/dev/dri/card{minor}", f"/dev/dri/card{minor}", "rw"),
            (f"/dev/dri/renderD{render}", f"/dev/dri/renderD{render}", "rw"),
        ]
        assert dict(one.response.envs) == {
            "HIP_VISIBLE_DEVICES": "0",
            "ROCR_VISIBLE_DEVICES": "0",
            "HYHAL_PATH": "/opt/hyhal",
        }
        assert [(m.container_path, m.host_path, m.read_only) for m in one.response.mounts] == [
            ("/opt/hyhal", "/opt/hyhal", True)
        ]


def test_hot_removal_reaches_the_kubelet_and_the_card_returns(hygon_node: HygonNode) -> None:
    node = hygon_node
    ids = [c.id for c in node.cards]
    gone = node.cards[2]
    dcu = resource("dcu")
    with running_daemon(node, card_pool("dcu", *ids)):
        node.kubelet.wait_for(lambda k: len(k.resource(dcu).healthy) == 8, WAIT, "all Healthy")
        node.fake.remove_card(gone.pci_address)
        node.kubelet.wait_for(lambda k: k.resource(dcu).unhealthy == {gone.id}, WAIT, "removed → Unhealthy")
        assert node.kubelet.resource(dcu).healthy == set(ids) - {gone.id}
        node.fake.restore_card(gone.pci_address)
        node.kubelet.wait_for(lambda k: len(k.resource(dcu).healthy) == 8, WAIT, "back → Healthy")
        assert not node.kubelet.resource(dcu).unhealthy


def test_time_sliced_pool_gives_four_units_per_dcu(hygon_node: HygonNode) -> None:
    node = hygon_node
    chosen = [node.cards[0], node.cards[5]]
    shared = resource("dcu-shared")
    with running_daemon(node, card_pool("dcu-shared", *(c.id for c in chosen), slicesPerUnit=4)):
        node.kubelet.wait_for(lambda k: shared in k.resources() and k.resource(shared).connected, WAIT, "up")
        assert node.kubelet.resource(shared).healthy == {f"{c.id}::{n}" for c in chosen for n in range(4)}

        pair = node.kubelet.allocate("a", "main", shared, 2)
        used = {d.split("::")[0] for d in pair.device_ids}
        assert used == {c.id for c in chosen}, "two replicas spread over both DCUs"
        render_nodes = [d.container_path for d in pair.response.devices if "renderD" in d.container_path]
        assert sorted(render_nodes) == sorted(
            f"/dev/dri/renderD{c.attributes['drmRenderMinor']}" for c in chosen
        )
        assert pair.response.envs["HIP_VISIBLE_DEVICES"] == "0,1"

        node.fake.unbind(chosen[1].pci_address)
        replicas = {f"{chosen[1].id}::{n}" for n in range(4)}
        node.kubelet.wait_for(
            lambda k: k.resource(shared).unhealthy == replicas, WAIT, "unbound → 4 Unhealthy"
        )
        node.fake.bind(chosen[1].pci_address)
        node.kubelet.wait_for(lambda k: not k.resource(shared).unhealthy, WAIT, "rebound → Healthy")
