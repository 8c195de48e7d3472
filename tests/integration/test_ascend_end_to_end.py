"""The Ascend backend through the whole daemon: real ctypes on the fake libdcmi, real sockets, kubelet sim.

One daemon serves an NPU pool (whole 910 A1 chips), a vNPU pool (``unit: Partition``, ``vir02``, laid out
by the daemon on a free chip) and an NVIDIA GPU pool (the fake libnvidia-ml) at once. Preferred
allocation keeps 4-chip jobs inside one HCCS ring; a hung chip neither delays another chip's health
update nor an Allocate on the gRPC socket; vNPUs survive a daemon restart under the same ids.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hcs_deviceplugin.backend import Backend, BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.model import Card
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, card_pool, pool_doc, resource
from vendors.ascend import AscendBackend
from vendors.ascend import create_backend as create_ascend
from vendors.ascend.fake import FakeAscendNode, node_910_a1, node_910b, prepare_fake_ascend_node
from vendors.nvidia import create_backend as create_nvidia
from vendors.nvidia.fake.node import pcie_node
from vendors.nvidia.fake.prepare import prepare_fake_node

NPU, VNPU, GPU = resource("npu"), resource("vnpu"), resource("gpu")
ASCEND_FAST = {"healthIntervalSeconds": "0.05", "callTimeoutSeconds": "0.3"}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ascend-e2e-build")


@dataclass
class Site:
    """A temp node: fakes, backends, kubelet simulator and daemon, all stopped at teardown."""

    root: Path
    build_dir: Path
    monkeypatch: pytest.MonkeyPatch
    kubelet: KubeletSimulator
    stops: list[threading.Event] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)
    fakes: list[FakeAscendNode] = field(default_factory=list)

    def ascend_node(self, description: Mapping[str, Any]) -> FakeAscendNode:
        fake = prepare_fake_ascend_node(self.root / "ascend", description, build_dir=self.build_dir)
        for key, value in fake.env.items():
            self.monkeypatch.setenv(key, value)
        self.fakes.append(fake)
        return fake

    def ascend(self, fake: FakeAscendNode) -> AscendBackend:
        stop = threading.Event()
        self.stops.append(stop)
        options = {**fake.backend_options, **ASCEND_FAST}
        return create_ascend(BackendConfig(host_root=fake.host_root, options=options, stop=stop))

    def nvidia(self) -> Backend:
        fake = prepare_fake_node(
            self.root / "nvidia", pcie_node(2, seed="ascend-e2e"), build_dir=self.build_dir
        )
        for key, value in fake.env.items():
            self.monkeypatch.setenv(key, value)
        stop = threading.Event()
        self.stops.append(stop)
        options = {**fake.backend_options, "recoverySeconds": "0.2", "healthWaitMs": "50"}
        return create_nvidia(BackendConfig(host_root=fake.host_root, options=options, stop=stop))

    def daemon(self, pools: str, *backends: Backend) -> Daemon:
        write_configmap_volume(self.root / "pools", {"pools.yaml": pools})
        daemon = Daemon(
            DaemonConfig(
                plugin_dir=self.root / "dp",
                node_name="node-1",
                registration_backoff=Backoff(0.02, 0.2),
                pod_resources_socket=self.root / "pr.sock",
                pod_resources_interval=0.1,
            ),
            {b.name: b for b in backends},
        )
        daemon.add_source(lambda cb: DirectoryPoolSource(self.root / "pools", cb))
        daemon.start()
        self.daemons.append(daemon)
        return daemon

    def stop_daemon(self, daemon: Daemon) -> None:
        for stop in self.stops:
            stop.set()
        daemon.stop()
        self.stops.clear()

    def wait_registered(self, *names: str) -> None:
        self.kubelet.wait_for(
            lambda k: all(n in k.resources() and k.resource(n).connected for n in names), WAIT, f"{names} up"
        )


@pytest.fixture
def site(build_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    root = Path(tempfile.mkdtemp(prefix="hcsa", dir="/tmp"))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    s = Site(root, build_dir, monkeypatch, kubelet)
    try:
        yield s
    finally:
        for fake in s.fakes:
            fake.control.clear()  # ends any hang, so no DCMI call outlives the test
        for stop in s.stops:
            stop.set()
        for daemon in s.daemons:
            daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def _phys(cards: Mapping[str, Card], ids: Sequence[str]) -> list[int]:
    return sorted(cards[i].index for i in ids)


def test_one_daemon_serves_npu_vnpu_and_gpu_pools(site: Site) -> None:
    fake = site.ascend_node(node_910_a1())
    ascend = site.ascend(fake)
    nvidia = site.nvidia()
    chips = {c.id: c for c in ascend.discover().cards}
    by_phy = sorted(chips.values(), key=lambda c: c.index)
    gpus = [c.id for c in nvidia.discover().cards]
    pools = pool_doc(
        card_pool("npu", *[c.id for c in by_phy[:7]]),
        {"name": "vnpu", "unit": "Partition", "profile": "vir02", "devices": [{"uuid": by_phy[7].id}]},
        card_pool("gpu", *gpus),
    )
    site.daemon(pools, ascend, nvidia)
    site.wait_registered(NPU, VNPU, GPU)
    kubelet = site.kubelet
    assert kubelet.resource(NPU).healthy == {c.id for c in by_phy[:7]}
    assert kubelet.resource(GPU).healthy == set(gpus)
    kubelet.wait_for(lambda k: len(k.resource(VNPU).healthy) == 15, WAIT, "chip 7 laid out as 15 x vir02")
    vnpus = {p.id: p for p in ascend.discover().partitions}
    assert kubelet.resource(VNPU).healthy == set(vnpus)

    # Ring 0 (chips 0-3) has 4 free, ring 1 (4-6) 3: one chip goes to ring 1, four take ring 0 whole.
    one = kubelet.allocate("one", "main", NPU, 1)
    assert _phys(chips, one.device_ids) in ([4], [5], [6])
    four = kubelet.allocate("four", "main", NPU, 4)
    assert _phys(chips, four.device_ids) == [0, 1, 2, 3]
    assert four.response.envs["ASCEND_VISIBLE_DEVICES"] == "0,1,2,3"
    assert four.response.envs["ASCEND_RUNTIME_OPTIONS"] == ""
    paths = [d.host_path for d in four.response.devices]
    assert paths[:4] == [f"/dev/davinci{i}" for i in range(4)]
    assert {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} <= set(paths)

    part = kubelet.allocate("v", "main", VNPU, 1)
    vdev = vnpus[part.device_ids[0]].attributes["vdevId"]
    assert part.response.envs["ASCEND_VISIBLE_DEVICES"] == vdev
    assert part.response.envs["ASCEND_RUNTIME_OPTIONS"] == "VIRTUAL"
    assert (part.response.devices[0].host_path, part.response.devices[0].container_path) == (
        f"/dev/vdavinci{vdev}",
        f"/dev/davinci{vdev}",
    )
    gpu = kubelet.allocate("g", "main", GPU, 1)
    assert gpu.response.envs["NVIDIA_VISIBLE_DEVICES"] in gpus

    fake.control.set_health(2, 3)
    kubelet.wait_for(lambda k: k.resource(NPU).unhealthy == {by_phy[2].id}, WAIT, "chip 2 critical")
    fake.control.set_health(7, 3)
    kubelet.wait_for(lambda k: k.resource(VNPU).unhealthy == set(vnpus), WAIT, "vNPUs follow chip 7")
    assert len(kubelet.resource(GPU).healthy) == 2, "the GPU pool is untouched"
    fake.control.set_health(2, 0)
    fake.control.set_health(7, 0)
    kubelet.wait_for(
        lambda k: not k.resource(NPU).unhealthy and not k.resource(VNPU).unhealthy, WAIT, "all healthy again"
    )


def test_hung_chip_delays_neither_other_chips_nor_allocate(site: Site) -> None:
    fake = site.ascend_node(node_910b(8))
    ascend = site.ascend(fake)
    chips = sorted(ascend.discover().cards, key=lambda c: c.index)
    site.daemon(pool_doc(card_pool("npu", *[c.id for c in chips])), ascend)
    site.wait_registered(NPU)
    kubelet = site.kubelet

    fake.control.hang(1, 60)
    kubelet.wait_for(lambda k: k.resource(NPU).unhealthy == {chips[1].id}, WAIT, "hung chip 1 Unhealthy")
    fake.control.set_health(5, 3)
    kubelet.wait_for(
        lambda k: k.resource(NPU).unhealthy == {chips[1].id, chips[5].id}, WAIT, "chip 5 reported meanwhile"
    )
    allocated = kubelet.allocate("job", "main", NPU, 2)
    assert not {chips[1].id, chips[5].id} & set(allocated.device_ids)
    blocked = ascend.blocked_calls()
    assert list(blocked) == [chips[1].id], "all of the above happened while chip 1's call was still blocked"

    fake.control.hang(1, 0)
    fake.control.set_health(5, 0)
    kubelet.wait_for(lambda k: not k.resource(NPU).unhealthy, WAIT, "both back")
    assert ascend.blocked_calls() == {}


def test_vnpus_survive_a_daemon_restart(site: Site) -> None:
    fake = site.ascend_node(node_910b(2))
    pools = pool_doc(
        {
            "name": "vnpu",
            "unit": "Partition",
            "profile": "vir05_1c_16g",
            "devices": [{"pciAddress": "0000:c2:00.0"}],
        }
    )
    first = site.daemon(pools, site.ascend(fake))
    site.wait_registered(VNPU)
    site.kubelet.wait_for(lambda k: len(k.resource(VNPU).healthy) == 4, WAIT, "4 x vir05_1c_16g")
    before = site.kubelet.resource(VNPU).healthy
    state = fake.files.state.read_text()
    site.stop_daemon(first)

    restarted = site.ascend(fake)
    assert {p.id for p in restarted.discover().partitions} == before
    site.daemon(pools, restarted)
    site.kubelet.wait_for(
        lambda k: k.resource(VNPU).connected and k.resource(VNPU).healthy == before, WAIT, "same vNPUs again"
    )
    assert fake.files.state.read_text() == state, "rediscovered, not recreated"


def test_template_change_waits_for_the_vnpu_in_use(site: Site) -> None:
    fake = site.ascend_node(node_910b(2))
    ascend = site.ascend(fake)
    chip = sorted(ascend.discover().cards, key=lambda c: c.index)[1]

    def vnpu_pool(profile: str) -> str:
        return pool_doc(
            {"name": "vnpu", "unit": "Partition", "profile": profile, "devices": [{"uuid": chip.id}]}
        )

    daemon = site.daemon(vnpu_pool("vir05_1c_16g"), ascend)
    site.wait_registered(VNPU)
    site.kubelet.wait_for(lambda k: len(k.resource(VNPU).healthy) == 4, WAIT, "4 x vir05_1c_16g")
    site.kubelet.allocate("inference", "main", VNPU, 1)
    daemon.wait_for(lambda v: chip.id in v.held, WAIT, "the vNPU is held")
    state = fake.files.state.read_text()

    write_configmap_volume(site.root / "pools", {"pools.yaml": vnpu_pool("vir10_3c_32g")})
    daemon.wait_for(lambda v: chip.id in v.draining, WAIT, "draining while a vNPU is in use")
    assert fake.files.state.read_text() == state, "no vNPU destroyed while one is held"

    site.kubelet.free_pod("inference")
    daemon.wait_for(lambda v: len(v.pools["vnpu"].units) == 2, WAIT, "relaid out once free")
    assert {p.profile for p in ascend.discover().partitions} == {"vir10_3c_32g"}


def test_template_the_family_lacks_is_a_pool_error(site: Site) -> None:
    fake = site.ascend_node(node_910_a1())
    ascend = site.ascend(fake)
    chips = sorted(ascend.discover().cards, key=lambda c: c.index)
    pools = pool_doc(
        {"name": "vnpu", "unit": "Partition", "profile": "vir05_1c_16g", "devices": [{"uuid": chips[0].id}]},
        card_pool("npu", chips[1].id),
    )
    daemon = site.daemon(pools, ascend)
    site.wait_registered(NPU, VNPU)
    view = daemon.wait_for(lambda v: bool(v.layout_errors), WAIT, "layout error")
    (message,) = view.layout_errors
    assert message.startswith(f"pool vnpu: card {chips[0].id}: cannot lay out vir05_1c_16g:")
    assert "Ascend910 chip" in message and "it offers vir02, vir04, vir08, vir16" in message
    assert view.pools["vnpu"].units == () and len(view.pools["npu"].units) == 1
