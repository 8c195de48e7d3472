"""MPS end to end: the fake NVML node, the fake ``nvidia-cuda-mps-control``, the whole daemon, kubelet's
simulator with pod-resources.

One card in a pool with ``sharing: mps`` and 2 replicas: two pods get distinct replicas with the MPS
client env and mounts; the control daemon was started for that card alone and told the limits; a
container asking for 2 replicas is refused; the daemon killed makes the card Unhealthy and it is
Healthy again once restarted; the card moved out of the pool while pods hold it drains first (its
daemon kept), then joins its new pool once they are gone (its daemon told to quit).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.records import AllocationError
from hcs_deviceplugin.observability.report import build_report
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, card_pool, fresh_node, pool_doc, resource
from vendors.nvidia import create_backend
from vendors.nvidia.backend import NvidiaBackend
from vendors.nvidia.fake.node import pcie_node
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

FAKE_CONTROL = Path(__file__).resolve().parents[2] / "vendors" / "nvidia" / "fake" / "nvidia-cuda-mps-control"
MPS_ROOT = "/mps"
SHARED = resource("shared")
PLAIN = resource("plain")


class Transitions:
    """The daemon's observer: every health transition, in order, to wait on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seen: list[tuple[str, str]] = []

    def health_transition(self, card: str, to: str) -> None:
        with self._cond:
            self.seen.append((card, to))
            self._cond.notify_all()

    def reregistration(self, pool: str) -> None:
        pass

    def wait(self, card: str, after: int, *states: str) -> None:
        """Wait until ``card`` went through ``states`` in order, counting from transition ``after``."""

        def done() -> bool:
            mine = [to for c, to in self.seen[after:] if c == card]
            it = iter(mine)
            return all(state in it for state in states)

        with self._cond:
            assert self._cond.wait_for(done, WAIT), f"{card} did not go {states}: {self.seen[after:]}"


class Node:
    def __init__(self, root: Path, fake: FakeNvidiaNode) -> None:
        self.root = root
        self.fake = fake
        self.stop = threading.Event()
        self.backend: NvidiaBackend = create_backend(
            BackendConfig(
                host_root=fake.host_root,
                options={
                    **fake.backend_options,
                    "healthWaitMs": "50",
                    "mpsControl": str(FAKE_CONTROL),
                    "mpsRoot": MPS_ROOT,
                    "mpsCheckSeconds": "0.05",
                    "mpsRetrySeconds": "0.1",
                },
                stop=self.stop,
            )
        )
        self.cards = sorted(c.id for c in self.backend.discover().cards)
        self.memory = {c.id: c.memory_bytes for c in self.backend.discover().cards}
        self.kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
        self.kubelet.start()
        self.transitions = Transitions()
        self.daemon: Daemon | None = None

    def pipe(self, card: str) -> Path:
        return self.fake.host_root / MPS_ROOT.lstrip("/") / card / "pipe"

    def log(self, card: str) -> str:
        path = self.pipe(card).parent / "log" / "control.log"
        return path.read_text() if path.exists() else ""

    def daemon_pid(self, card: str) -> int | None:
        try:
            return int((self.pipe(card) / "nvidia-cuda-mps-control.pid").read_text())
        except (OSError, ValueError):
            return None

    def write_pools(self, *pools: dict[str, object]) -> None:
        write_configmap_volume(self.root / "pools", {"pools.yaml": pool_doc(*pools)})

    def start(self) -> None:
        self.daemon = Daemon(
            DaemonConfig(
                plugin_dir=self.root / "dp",
                node_name="node-1",
                registration_backoff=Backoff(0.02, 0.2),
                pod_resources_socket=self.root / "pr.sock",
                pod_resources_interval=0.1,
                allocation_settle_seconds=0.3,
            ),
            {self.backend.name: self.backend},
            observer=self.transitions,
        )
        self.daemon.add_source(lambda cb: DirectoryPoolSource(self.root / "pools", cb))
        self.daemon.start()

    def close(self) -> None:
        self.stop.set()
        if self.daemon is not None:
            self.daemon.stop()
        self.kubelet.stop()
        for card in self.cards:  # the control daemons outlive the plugin daemon, as they must
            pid = self.daemon_pid(card)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="hcsm", dir="/tmp"))  # short: MPS sockets live under it
    fake = prepare_fake_node(root / "f", pcie_node(2, seed="mps"))
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    n = Node(root, fake)
    try:
        yield n
    finally:
        n.close()
        shutil.rmtree(root, ignore_errors=True)


def test_mps_pool_end_to_end(node: Node) -> None:
    card, other = node.cards
    node.write_pools(
        card_pool("shared", card, slicesPerUnit=2, sharing="mps", memoryPerReplica="1Gi"),
        card_pool("plain", other),
    )
    node.start()
    kubelet = node.kubelet
    replicas = {f"{card}::0", f"{card}::1"}
    kubelet.wait_for(lambda k: SHARED in k.resources() and k.resource(SHARED).healthy == replicas, WAIT, "up")

    # The control daemon: this card only, told the limits before the card was Healthy.
    log = node.log(card)
    assert f"CUDA_VISIBLE_DEVICES={card}" in log
    assert "set_default_device_pinned_mem_limit 0 1024M" in log
    assert "set_default_active_thread_percentage 50" in log
    assert node.log(other) == "", "a card outside MPS pools gets no daemon"

    assert node.daemon is not None
    [shown] = [p for p in build_report(node.daemon.view(), "node-1")["pools"] if p["name"] == "shared"]
    assert (shown["sharing"], shown["memoryPerReplica"], shown["slicesPerUnit"]) == ("mps", 1 << 30, 2)

    # Two pods, distinct replicas, each an MPS client of that card.
    first = kubelet.allocate("a", "main", SHARED, 1)
    second = kubelet.allocate("b", "main", SHARED, 1)
    assert {first.device_ids[0], second.device_ids[0]} == replicas
    pipe = f"{MPS_ROOT}/{card}/pipe"
    for answer in (first.response, second.response):
        assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == card
        assert answer.envs["CUDA_MPS_PIPE_DIRECTORY"] == pipe
        assert answer.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1024M"
        assert answer.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        mounts = {(m.container_path, m.host_path, m.read_only) for m in answer.mounts}
        assert (pipe, pipe, False) in mounts
        assert ("/dev/shm", f"{MPS_ROOT}/shm", False) in mounts

    # The daemon killed: Unhealthy, restarted, Healthy; the new one told the limits again.
    before = len(node.transitions.seen)
    old_pid = node.daemon_pid(card)
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    node.transitions.wait(card, before, "Unhealthy", "Healthy")
    new_pid = node.daemon_pid(card)
    assert new_pid not in (None, old_pid)
    assert node.log(card).count("set_default_device_pinned_mem_limit 0 1024M") == 2
    kubelet.wait_for(lambda k: k.resource(SHARED).healthy == replicas, WAIT, "healthy again")

    # The card moved to a plain pool while pods a and b hold it: it drains, its daemon stays.
    node.write_pools(card_pool("shared"), card_pool("plain", other, card))
    assert node.daemon is not None
    node.daemon.wait_for(lambda v: card in v.draining, WAIT, "draining")
    assert f"{card}" not in {d.split("::")[0] for d in kubelet.resource(PLAIN).healthy}
    assert node.daemon_pid(card) == new_pid and "quit" not in node.log(card)

    kubelet.free_pod("a")
    kubelet.free_pod("b")
    kubelet.wait_for(lambda k: card in k.resource(PLAIN).healthy, WAIT, "joined the plain pool once free")
    node.daemon.wait_for(lambda v: card not in v.draining, WAIT, "drained")
    kubelet.wait_for(lambda k: "quit" in node.log(card), WAIT, "the daemon told to quit")


def test_a_container_asking_for_two_mps_replicas_is_refused(node: Node) -> None:
    card, _ = node.cards
    node.write_pools(card_pool("shared", card, slicesPerUnit=4, sharing="mps"))
    node.start()
    node.kubelet.wait_for(
        lambda k: SHARED in k.resources() and len(k.resource(SHARED).healthy) == 4, WAIT, "up"
    )
    with pytest.raises(AllocationError, match=r"shares its cards by 'mps'.*ask for 1"):
        node.kubelet.allocate("greedy", "main", SHARED, 2)
    # The default limit is the card's memory divided by the replicas.
    one = node.kubelet.allocate("ok", "main", SHARED, 1)
    share = node.memory[card] // 4 // (1 << 20)
    assert one.response.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={share}M"
    assert one.response.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"


def test_a_backend_without_the_sharing_mode_refuses_the_cards_as_a_config_error() -> None:
    with fresh_node() as simulated:
        cards = sorted(c.id for c in simulated.backend.discover().cards)[:1]
        simulated.write_pools(pool_doc(card_pool("m", *cards, slicesPerUnit=2, sharing="mps")))
        daemon = simulated.start_daemon()
        view = daemon.wait_for(lambda v: bool(v.config_errors), WAIT, "a config error")
        [error] = view.config_errors
        assert f"pool m shares its cards by 'mps', which backend simulated of card {cards[0]}" in error
        assert not view.pools["m"].units


def test_mps_to_time_slicing_under_the_same_resource_drains_while_held(node: Node) -> None:
    """DKP's label MPS → TimeSlicing keeps nvidia.com/gpu and the replica ids: the card still drains."""
    card, _ = node.cards
    node.write_pools(card_pool("shared", card, slicesPerUnit=2, sharing="mps"))
    node.start()
    kubelet = node.kubelet
    replicas = {f"{card}::0", f"{card}::1"}
    kubelet.wait_for(lambda k: SHARED in k.resources() and k.resource(SHARED).healthy == replicas, WAIT, "up")
    held = kubelet.allocate("a", "main", SHARED, 1)
    assert "CUDA_MPS_PIPE_DIRECTORY" in held.response.envs
    pid = node.daemon_pid(card)

    node.write_pools(card_pool("shared", card, slicesPerUnit=2))
    assert node.daemon is not None
    node.daemon.wait_for(lambda v: card in v.draining, WAIT, "draining under the same resource")
    assert node.daemon_pid(card) == pid and "quit" not in node.log(card)

    kubelet.free_pod("a")
    node.daemon.wait_for(lambda v: card not in v.draining and bool(v.pools["shared"].units), WAIT, "served")
    kubelet.wait_for(lambda k: k.resource(SHARED).healthy == replicas, WAIT, "time-sliced replicas")
    plain = kubelet.allocate("b", "main", SHARED, 1)
    assert "CUDA_MPS_PIPE_DIRECTORY" not in plain.response.envs
    kubelet.wait_for(lambda k: "quit" in node.log(card), WAIT, "the daemon told to quit")
