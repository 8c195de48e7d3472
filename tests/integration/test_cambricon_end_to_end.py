"""The Cambricon backend through the whole daemon: a fake MLU host tree, real sockets, the kubelet simulator.

An MLU pool allocates with the MLU's host device nodes and ``CAMBRICON_VISIBLE_DEVICES``; a preferred
allocation of two on the 8-MLU MLU-Link node returns the two chips of one board; a ``core_state`` fault
reaches the kubelet as Unhealthy and recovers; a time-sliced pool advertises N units per MLU.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, card_pool, pool_doc, resource
from vendors.cambricon import CambriconBackend, create_backend
from vendors.cambricon.fake.tree import FakeMluNode, NodeSpec, mlulink_node, pcie_node, write_cambricon_node

BOARDS = [{f"MLU-1916a00{b}-0", f"MLU-1916a00{b}-1"} for b in range(4)]


@contextmanager
def mlu_daemon(
    spec: NodeSpec, pools: str | None = None, slices: int = 1
) -> Iterator[tuple[FakeMluNode, CambriconBackend, KubeletSimulator, list[str]]]:
    """A daemon serving one pool ``mlu`` of every MLU on a fake host, with a kubelet simulator."""
    root = Path(tempfile.mkdtemp(prefix="hcsc", dir="/tmp"))
    stop = threading.Event()
    node = write_cambricon_node(root / "host", spec)
    options = {"rescanSeconds": "0.05", "udev": "off"}
    if node.link_file is not None:
        options["mluLinkFile"] = str(node.link_file)
    backend = create_backend(BackendConfig(host_root=node.host_root, options=options, stop=stop))
    cards = [c.id for c in backend.discover().cards]
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    extra = {"slicesPerUnit": slices} if slices > 1 else {}
    write_configmap_volume(
        root / "pools", {"pools.yaml": pools or pool_doc(card_pool("mlu", *cards, **extra))}
    )
    daemon = Daemon(
        DaemonConfig(plugin_dir=root / "dp", node_name="node-1", registration_backoff=Backoff(0.02, 0.2)),
        {backend.name: backend},
    )
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    daemon.start()
    try:
        name = resource("mlu")
        kubelet.wait_for(lambda k: name in k.resources() and k.resource(name).connected, WAIT, "mlu pool up")
        yield node, backend, kubelet, cards
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_mlu_pool_allocates_device_nodes_and_visible_devices() -> None:
    name = resource("mlu")
    with mlu_daemon(pcie_node(4)) as (_node, _backend, kubelet, cards):
        assert kubelet.resource(name).healthy == set(cards)
        assert kubelet.resource(name).numa[cards[0]] == [0] and kubelet.resource(name).numa[cards[3]] == [1]
        record = kubelet.allocate("job", "main", name, 1)
        (card,) = record.device_ids
        slot = cards.index(card)
        response = record.response
        assert response.envs["CAMBRICON_VISIBLE_DEVICES"] == str(slot)
        host_paths = [d.host_path for d in response.devices]
        assert host_paths[0] == f"/dev/cambricon_dev{slot}"
        assert {f"/dev/cambricon_ipcm{slot}", f"/dev/commu{slot}", "/dev/cambricon_ctl"} <= set(host_paths)
        assert all(d.container_path == d.host_path for d in response.devices)
        assert [(m.host_path, m.read_only) for m in response.mounts] == [("/usr/bin/cnmon", True)]


def test_preferred_pair_on_the_mlu_link_node_is_one_board() -> None:
    name = resource("mlu")
    with mlu_daemon(mlulink_node(8)) as (_node, _backend, kubelet, _cards):
        single = kubelet.allocate("one", "main", name, 1)
        (taken,) = single.device_ids
        pair = kubelet.allocate("two", "main", name, 2)
        assert set(pair.device_ids) in BOARDS, "two chips of one MLU370-X8 board"
        assert taken not in pair.device_ids
        slots = sorted(int(s) for s in pair.response.envs["CAMBRICON_VISIBLE_DEVICES"].split(","))
        assert len(slots) == 2
        assert {f"/dev/cambricon_dev{s}" for s in slots} <= {d.host_path for d in pair.response.devices}
        again = kubelet.allocate("three", "main", name, 2)
        assert set(again.device_ids) in BOARDS and not set(again.device_ids) & set(pair.device_ids)


def test_core_state_fault_reaches_the_kubelet_and_recovers() -> None:
    name = resource("mlu")
    with mlu_daemon(mlulink_node(8)) as (node, _backend, kubelet, cards):
        bdf = "0000:22:00.0"
        card = "MLU-1916a001-0"
        assert card in cards
        node.set_core_state(bdf, "CN_RESET_ERR")
        kubelet.wait_for(lambda k: k.resource(name).unhealthy == {card}, WAIT, "CN_RESET_ERR -> Unhealthy")
        assert len(kubelet.resource(name).healthy) == 7
        node.set_core_state(bdf, "CN_RUNNING")
        kubelet.wait_for(lambda k: k.resource(name).healthy == set(cards), WAIT, "CN_RUNNING -> Healthy")


def test_hot_removal_reaches_the_kubelet_and_the_card_returns() -> None:
    name = resource("mlu")
    with mlu_daemon(pcie_node(2)) as (node, _backend, kubelet, cards):
        node.remove("0000:04:00.0")
        kubelet.wait_for(lambda k: k.resource(name).unhealthy == {cards[1]}, WAIT, "removed -> Unhealthy")
        node.restore("0000:04:00.0")
        kubelet.wait_for(lambda k: k.resource(name).healthy == set(cards), WAIT, "back -> Healthy")


def test_time_sliced_pool_gives_n_units_per_mlu() -> None:
    name = resource("mlu")
    with mlu_daemon(pcie_node(2), slices=3) as (_node, _backend, kubelet, cards):
        assert kubelet.resource(name).healthy == {f"{c}::{n}" for c in cards for n in range(3)}
        first = kubelet.allocate("a", "main", name, 1)
        second = kubelet.allocate("b", "main", name, 1)
        used = {first.device_ids[0].split("::")[0], second.device_ids[0].split("::")[0]}
        assert used == set(cards), "single replicas spread over the MLUs"
        slots = {
            first.response.envs["CAMBRICON_VISIBLE_DEVICES"],
            second.response.envs["CAMBRICON_VISIBLE_DEVICES"],
        }
        assert slots == {"0", "1"}
