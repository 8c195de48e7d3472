"""The NVIDIA backend through the whole daemon: real pynvml on the fake libnvidia-ml, real sockets.

A pool of 2 NVIDIA cards with 4 replicas each advertises 8 units and allocates by replica; a
critical Xid reaches the kubelet simulator as Unhealthy for all 4 replicas of that card, and the
card comes back after the recovery time.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, card_pool, pool_doc, resource
from vendors.nvidia import create_backend
from vendors.nvidia.fake.node import pcie_node
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

RESOURCE = resource("nv-shared")


@pytest.fixture
def fake_nvidia(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, FakeNvidiaNode]]:
    root = Path(tempfile.mkdtemp(prefix="hcsn", dir="/tmp"))
    fake = prepare_fake_node(root / "fake", pcie_node(2, seed="e2e"))
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    try:
        yield root, fake
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_two_cards_four_replicas_advertise_eight_units_and_allocate_by_replica(
    fake_nvidia: tuple[Path, FakeNvidiaNode],
) -> None:
    root, fake = fake_nvidia
    stop = threading.Event()
    backend = create_backend(
        BackendConfig(
            host_root=fake.host_root,
            options={**fake.backend_options, "recoverySeconds": "0.2", "healthWaitMs": "50"},
            stop=stop,
        )
    )
    cards = [c.id for c in backend.discover().cards]
    assert len(cards) == 2 and all(c.startswith("GPU-") for c in cards)
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    write_configmap_volume(
        root / "pools", {"pools.yaml": pool_doc(card_pool("nv-shared", *cards, slicesPerUnit=4))}
    )
    daemon = Daemon(
        DaemonConfig(plugin_dir=root / "dp", node_name="node-1", registration_backoff=Backoff(0.02, 0.2)),
        {backend.name: backend},
    )
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    daemon.start()
    try:
        kubelet.wait_for(lambda k: RESOURCE in k.resources() and k.resource(RESOURCE).connected, WAIT, "up")
        view = kubelet.resource(RESOURCE)
        assert view.healthy == {f"{c}::{n}" for c in cards for n in range(4)}
        assert len(view.healthy) == 8

        first = kubelet.allocate("a", "main", RESOURCE, 1)
        second = kubelet.allocate("b", "main", RESOURCE, 1)
        pair = kubelet.allocate("c", "main", RESOURCE, 2)
        used_cards = [first.device_ids[0].split("::")[0], second.device_ids[0].split("::")[0]]
        assert sorted(used_cards) == sorted(cards), "single replicas go to the least-loaded card"
        assert first.response.envs["NVIDIA_VISIBLE_DEVICES"] == used_cards[0]
        assert {d.split("::")[0] for d in pair.device_ids} == set(cards), (
            "a 2-replica request spans both cards"
        )
        assert sorted(pair.response.envs["NVIDIA_VISIBLE_DEVICES"].split(",")) == sorted(cards)

        fake.control.xid(cards[0], 79)
        replicas0 = {f"{cards[0]}::{n}" for n in range(4)}
        kubelet.wait_for(lambda k: k.resource(RESOURCE).unhealthy == replicas0, WAIT, "Xid 79 → Unhealthy")
        kubelet.wait_for(lambda k: not k.resource(RESOURCE).unhealthy, WAIT, "recovered → Healthy")
        assert len(kubelet.resource(RESOURCE).healthy) == 8
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
