"""``hcs-deviceplugin run`` as a black box on a simulated node, for the reliability scenarios.

The daemon runs as its own process, exactly as on a node, with the simulated backend; around it an
in-process kubelet simulator (real sockets, pod-resources included, a timeline of everything it saw)
and a pools directory written the way kubelet updates a ConfigMap volume. Nothing of the daemon is
imported or patched: the scenarios see it only through its sockets, its HTTP endpoints, its files
and its exit status, as an operator would.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.timeline import Violation, check_timeline
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume

NODE = "builtin:default"
CARDS = (
    "GPU-fb7997af-015e-5593-a98f-d07392e85cd7",
    "GPU-496c5a9a-9880-51e7-94f0-4ffd5a04c099",
    "GPU-2ac88a71-0e02-5d15-901a-7e29d9b6b94d",
)
"""Three whole cards of the embedded default node (the fourth is MIG-enabled)."""
WAIT = 20.0


def resource(pool: str) -> str:
    return f"gpu.deckhouse.io/{pool}"


def socket_of(pool: str) -> str:
    return f"hcs-gpu.deckhouse.io_{pool}.sock"


def pools_yaml(pools: dict[str, Sequence[str]], slices: dict[str, int] | None = None) -> str:
    """A native pools document: pool name → card ids (``slices`` per pool, default 1)."""
    docs: list[dict[str, Any]] = []
    for name, cards in pools.items():
        pool: dict[str, Any] = {"name": name, "devices": [{"uuid": c} for c in cards]}
        if slices and slices.get(name, 1) > 1:
            pool["slicesPerUnit"] = slices[name]
        docs.append(pool)
    return yaml.safe_dump({"version": "v1", "pools": docs}, sort_keys=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
        return 0, str(err)


def wait_until(check: Callable[[], bool], timeout: float, what: str, poll: float = 0.005) -> float:
    """Poll ``check`` until true; the seconds it took. TimeoutError naming ``what`` otherwise."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)
    return time.monotonic() - began


@dataclass
class DaemonProcess:
    """One ``hcs-deviceplugin run`` process."""

    proc: subprocess.Popen[str]
    port: int
    log_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def readyz(self) -> tuple[int, str]:
        return http_get(f"{self.base}/readyz", timeout=3.0)

    def metrics(self) -> str:
        return http_get(f"{self.base}/metrics")[1]

    def status_field(self, name: str) -> int:
        """A ``/proc/<pid>/status`` value in KiB (VmRSS, VmHWM)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
        raise KeyError(name)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@dataclass
class Site:
    """A node's directories, its kubelet simulator and the daemons started on it."""

    root: Path
    kubelet: KubeletSimulator
    daemons: list[DaemonProcess] = field(default_factory=list)

    @property
    def plugin_dir(self) -> Path:
        return self.root / "dp"

    @property
    def pools_dir(self) -> Path:
        return self.root / "pools"

    @property
    def pod_resources(self) -> Path:
        return self.root / "pr.sock"

    def write_pools(self, text: str) -> None:
        write_configmap_volume(self.pools_dir, {"pools.yaml": text})

    def start_daemon(self, *extra: str, interval: float = 0.2, wait_ready: bool = True) -> DaemonProcess:
        """Start ``run``; with ``wait_ready`` return once its HTTP endpoint answers."""
        port = free_port()
        log_path = self.root / f"daemon-{len(self.daemons)}.log"
        args = [
            sys.executable,
            "-m",
            "hcs_deviceplugin.cli",
            "run",
            "--plugin-dir",
            str(self.plugin_dir),
            "--pools-dir",
            str(self.pools_dir),
            "--vendors",
            "simulated",
            "--node-name",
            "node-1",
            "--pod-resources-socket",
            str(self.pod_resources),
            "--pod-resources-interval",
            str(interval),
            "--state-dir",
            str(self.root / "state"),
            "--cdi-dir",
            str(self.root / "cdi"),
            "--metrics-address",
            "127.0.0.1",
            "--metrics-port",
            str(port),
            *extra,
        ]
        with open(log_path, "w") as log_file:
            proc = subprocess.Popen(
                args,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "HCS_SIMULATED_NODE": NODE},
            )
        daemon = DaemonProcess(proc, port, log_path)
        self.daemons.append(daemon)
        if wait_ready:
            wait_until(lambda: daemon.readyz()[0] != 0 or not daemon.alive(), WAIT, "daemon HTTP endpoint")
        return daemon

    def connected(self, *pools: str) -> bool:
        views = self.kubelet.resources()
        return all(resource(p) in views and views[resource(p)].connected for p in pools)

    def advertised(self, pool: str) -> frozenset[str]:
        view = self.kubelet.resources().get(resource(pool))
        if view is None or not view.connected:
            return frozenset()
        return frozenset(view.healthy | view.unhealthy)

    def registrations(self, pool: str) -> int:
        return sum(1 for r in self.kubelet.registrations if r.accepted and r.resource_name == resource(pool))

    def violations(self) -> list[Violation]:
        return check_timeline(self.kubelet.timeline())


@contextmanager
def site() -> Iterator[Site]:
    """A fresh node in a short /tmp directory (unix socket paths stay under 108 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="hcsrel", dir="/tmp"))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    s = Site(root, kubelet)
    try:
        yield s
    finally:
        for daemon in s.daemons:
            if daemon.alive():
                daemon.signal(signal.SIGTERM)
                try:
                    daemon.wait(5)
                except subprocess.TimeoutExpired:
                    daemon.kill()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)
