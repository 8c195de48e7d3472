"""A node in a temp dir: kubelet simulator on real sockets, the simulated backend, a pools volume.

Socket paths must stay under 108 bytes, so the working directory is a short ``/tmp/hcs...`` one.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hcs_deviceplugin.backend import Backend, BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from vendors.simulated import SimulatedBackend, create_backend

WAIT = 10.0

# Card ids of the embedded default node (vendors/simulated/default_node.yaml).
H100 = [
    "GPU-fb7997af-015e-5593-a98f-d07392e85cd7",
    "GPU-496c5a9a-9880-51e7-94f0-4ffd5a04c099",
    "GPU-2ac88a71-0e02-5d15-901a-7e29d9b6b94d",
    "GPU-0041856c-3cfc-5227-850b-a3305930bce2",
]


def end_daemon_run(proc: subprocess.Popen[str], kubelet: KubeletSimulator, root: Path) -> None:
    """After a test that ran ``hcs-deviceplugin run`` against ``kubelet`` under ``root``: kill the
    daemon if the test left it running (a failed assertion), stop the kubelet, remove ``root``."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=5)
    kubelet.stop()
    shutil.rmtree(root, ignore_errors=True)


def resource(pool: str) -> str:
    return f"gpu.deckhouse.io/{pool}"


def pool_doc(*pools: dict[str, Any]) -> str:
    return yaml.safe_dump({"version": "v1", "pools": list(pools)}, sort_keys=False)


def card_pool(name: str, *cards: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra, "devices": [{"uuid": c} for c in cards]}


@dataclass
class Node:
    """Everything one test node needs, started and stopped by the fixture."""

    root: Path
    kubelet: KubeletSimulator
    backend: SimulatedBackend
    stop_event: threading.Event = field(default_factory=threading.Event)
    daemon: Daemon | None = None

    @property
    def plugin_dir(self) -> Path:
        return self.root / "dp"

    @property
    def pools_dir(self) -> Path:
        return self.root / "pools"

    def write_pools(self, text: str, key: str = "pools.yaml") -> None:
        write_configmap_volume(self.pools_dir, {key: text})

    def start_daemon(self, extra_backends: dict[str, Backend] | None = None) -> Daemon:
        backends: dict[str, Backend] = {self.backend.name: self.backend, **(extra_backends or {})}
        daemon = Daemon(
            DaemonConfig(
                plugin_dir=self.plugin_dir,
                node_name="node-1",
                backend_retry=Backoff(initial=0.05, maximum=0.2),
                registration_backoff=Backoff(initial=0.02, maximum=0.2),
                pod_resources_socket=self.root / "pr.sock",
                pod_resources_interval=0.1,
                allocation_settle_seconds=0.3,
            ),
            backends,
        )
        daemon.add_source(lambda on_change: DirectoryPoolSource(self.pools_dir, on_change))
        daemon.start()
        self.daemon = daemon
        return daemon

    def wait_registered(self, *pools: str) -> None:
        names = {resource(p) for p in pools}
        self.kubelet.wait_for(
            lambda k: all(n in k.resources() and k.resource(n).connected for n in names),
            WAIT,
            f"{sorted(names)} registered and streaming",
        )


@contextmanager
def fresh_node() -> Iterator[Node]:
    """A started kubelet simulator and simulated backend in a new temp dir; torn down on exit."""
    root = Path(tempfile.mkdtemp(prefix="hcs", dir="/tmp"))
    stop = threading.Event()
    backend = create_backend(BackendConfig(options={"node": "builtin:default"}, stop=stop))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    n = Node(root, kubelet, backend, stop)
    try:
        yield n
    finally:
        stop.set()
        if n.daemon is not None:
            n.daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def node() -> Iterator[Node]:
    with fresh_node() as n:
        yield n


@pytest.fixture
def node_factory() -> Callable[[], AbstractContextManager[Node]]:
    """For hypothesis tests, which need a fresh node per example, not per test function."""
    return fresh_node
