"""MPS: one CUDA MPS control daemon per shared card, supervised, and what a client container needs.

A pool with ``sharing: mps`` gives each replica of a card to one container, and the CUDA driver holds
each client to a share: the control daemon's default pinned device memory limit and active thread
percentage apply to every MPS server it starts (NVIDIA's plugin sets the same two in
``cmd/mps-control-daemon``). Per card, under the MPS root (``mpsRoot``, default ``/run/nvidia/mps``,
DKP's ``MPS_ROOT``), a host path that both this daemon and the client containers see:

* ``<root>/<card uuid>/pipe`` — the daemon's ``CUDA_MPS_PIPE_DIRECTORY`` (its ``control`` socket);
  mounted into each client at the same path;
* ``<root>/<card uuid>/log`` — its ``CUDA_MPS_LOG_DIRECTORY``;
* ``<root>/shm`` — mounted as ``/dev/shm`` into clients: MPS clients and servers share memory there, so
  the daemon's own ``/dev/shm`` must be that directory too (the chart mounts it; README, "MPS").

The daemon is started as the driver's tool is used: ``nvidia-cuda-mps-control -d`` with
``CUDA_VISIBLE_DEVICES=<card uuid>`` (so the card is device 0 to the daemon and to its clients), then
``set_default_device_pinned_mem_limit 0 <MiB>M`` and ``set_default_active_thread_percentage <pct>``
written to ``nvidia-cuda-mps-control``'s stdin. The limit is ``memory_per_replica`` or the card's memory
divided by the replicas; the percentage is ``100 / replicas``.

Supervision runs on one thread per backend, woken by :meth:`MpsSupervisor.configure` and every
``check_seconds``: a card newly shared is Unhealthy until its daemon answers; a daemon whose process is
gone (pid file, ``/proc``) makes the card Unhealthy and is started again (after ``retry_seconds`` when
starting fails), Healthy once it is back; a card no longer asked for (the core keeps asking while a
container holds it) gets ``quit``. Allocate never waits for any of this: :meth:`client` answers from
memory, and only for a card whose daemon is up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.model import Card, Mount, SharingRequest
from vendors.nvidia.mpssettings import MODE, MpsSettings

log = logging.getLogger(__name__)

CONTROL = "nvidia-cuda-mps-control"
PID_FILE = "nvidia-cuda-mps-control.pid"
DRIVER_BIN_DIRS = ("usr/bin", "run/nvidia/driver/usr/bin", "usr/local/nvidia/bin")
COMMAND_TIMEOUT = 10.0
SHM = "/dev/shm"

HealthSink = Callable[[str, str | None], None]
"""(card id, reason Unhealthy or None for Healthy)."""


@dataclass(frozen=True)
class MpsClient:
    """What a container given one replica of a card needs; computed when the card is configured."""

    pipe_dir: str
    shm_dir: str
    memory_limit_mib: int
    thread_percentage: int

    def env(self) -> dict[str, str]:
        return {
            "CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir,
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={self.memory_limit_mib}M",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(self.thread_percentage),
        }

    def mounts(self) -> tuple[Mount, ...]:
        return (
            Mount(container_path=self.pipe_dir, host_path=self.pipe_dir, read_only=False),
            Mount(container_path=SHM, host_path=self.shm_dir, read_only=False),
        )


def client_for(card: Card, request: SharingRequest, root: str) -> MpsClient:
    """The limits and paths of ``card`` shared as ``request`` asks (pure)."""
    replicas = max(request.replicas, 1)
    memory = request.memory_per_replica or card.memory_bytes // replicas
    return MpsClient(
        pipe_dir=f"{root.rstrip('/')}/{card.id}/pipe",
        shm_dir=f"{root.rstrip('/')}/shm",
        memory_limit_mib=max(memory // (1 << 20), 1),
        thread_percentage=max(100 // replicas, 1),
    )


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; reaps it first if it is our zombie (we are PID 1 in the container, and a
    daemonised control daemon that dies is re-parented to us)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


@dataclass(eq=False)  # never compared: no __eq__ to compile at start
class _Running:
    client: MpsClient
    request: SharingRequest
    healthy: bool = False
    retry_at: float = 0.0


class MpsSupervisor:
    """Runs and watches the control daemons of the cards the core asks to share; see the module doc."""

    def __init__(
        self,
        settings: MpsSettings,
        host_root: Path,
        cards: Callable[[], Mapping[str, Card]],
        on_health: HealthSink,
        stop: threading.Event,
    ) -> None:
        self._settings = settings
        self._host_root = host_root
        self._cards = cards
        self._on_health = on_health
        self._stop = stop
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._wanted: dict[str, SharingRequest] = {}
        self._running: dict[str, _Running] = {}
        self._clients: dict[str, MpsClient] = {}
        self._thread: threading.Thread | None = None

    # -- called by the backend ----------------------------------------------------------------------

    def configure(self, requests: Mapping[str, SharingRequest]) -> None:
        """Record the cards to share now and wake the supervisor; returns at once."""
        wanted = {card: r for card, r in requests.items() if r.mode == MODE}
        with self._lock:
            self._wanted = wanted
            start = self._thread is None and bool(wanted)
            if start:
                self._thread = threading.Thread(target=self._run, name="nvidia-mps", daemon=True)
        for card in wanted.keys() - self._clients.keys():
            self._on_health(card, "MPS control daemon starting")
        if start and self._thread is not None:
            self._thread.start()
        self._wake.set()

    def client(self, card_id: str) -> MpsClient | None:
        """The client settings of ``card_id`` while its daemon is up (Allocate reads this)."""
        return self._clients.get(card_id)

    def join(self, timeout: float) -> None:
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._reconcile()
            except Exception:
                log.exception("MPS supervision failed; trying again")
            self._wake.wait(self._settings.check_seconds)
            self._wake.clear()
        log.debug("MPS supervisor stopped; control daemons keep running for the containers using them")

    def _reconcile(self) -> None:
        with self._lock:
            wanted = dict(self._wanted)
        cards = self._cards()
        for card_id in sorted(self._running.keys() - wanted.keys()):
            self._quit(card_id)
        now = time.monotonic()
        for card_id, request in sorted(wanted.items()):
            card = cards.get(card_id)
            if card is None:
                continue
            client = client_for(card, request, self._settings.root)
            running = self._running.get(card_id)
            changed = running is not None and (running.client, running.request) != (client, request)
            if running is not None and running.healthy and not changed and self._daemon_alive(client):
                continue
            if changed and running is not None and running.healthy and self._daemon_alive(client):
                # New limits: told to the running daemon, never a quit under its clients. They apply
                # to MPS servers started from now on.
                self._start(card_id, client, request)
                continue
            if running is not None and running.healthy:
                running.healthy = False
                self._clients.pop(card_id, None)
                log.warning("MPS control daemon of card %s exited; starting it again", card_id)
                self._on_health(card_id, "MPS control daemon exited; restarting it")
            if running is not None and now < running.retry_at:
                continue
            self._start(card_id, client, request)

    # -- the tool -----------------------------------------------------------------------------------

    def _local(self, host_path: str) -> Path:
        return self._host_root / host_path.lstrip("/")

    def _env(self, card_id: str, client: MpsClient) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            CUDA_VISIBLE_DEVICES=card_id,
            CUDA_MPS_PIPE_DIRECTORY=str(self._local(client.pipe_dir)),
            CUDA_MPS_LOG_DIRECTORY=str(self._local(client.pipe_dir).parent / "log"),
        )
        return env

    def _control(self) -> str:
        configured = self._settings.control
        if configured:
            return configured
        found = shutil.which(CONTROL)
        if found:
            return found
        for folder in DRIVER_BIN_DIRS:
            candidate = self._host_root / folder / CONTROL
            if candidate.is_file():
                return str(candidate)
        raise FileNotFoundError(
            f"{CONTROL} not found on PATH nor under {self._host_root} ({', '.join(DRIVER_BIN_DIRS)})"
        )

    def _tell(self, card_id: str, client: MpsClient, *commands: str) -> str:
        """Send ``commands`` to the card's control daemon on stdin, as an operator would."""
        return self._control_run(
            card_id, client, [], "".join(f"{c}\n" for c in commands), ", ".join(commands)
        )

    def _control_run(
        self, card_id: str, client: MpsClient, args: list[str], stdin: str | None, what: str
    ) -> str:
        """Run the control tool for one card; RuntimeError naming ``what`` when it fails."""
        result = subprocess.run(
            [self._control(), *args],
            input=stdin,
            env=self._env(card_id, client),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{what}: {(result.stderr or result.stdout).strip()}")
        return result.stdout

    def _daemon_alive(self, client: MpsClient) -> bool:
        try:
            pid = int(self._local(client.pipe_dir).joinpath(PID_FILE).read_text().strip() or 0)
        except (OSError, ValueError):
            return False
        return pid > 0 and _alive(pid)

    def _start(self, card_id: str, client: MpsClient, request: SharingRequest) -> None:
        running = self._running.setdefault(card_id, _Running(client, request))
        running.client, running.request = client, request
        try:
            pipe = self._local(client.pipe_dir)
            for folder in (pipe, pipe.parent / "log", self._local(client.shm_dir)):
                folder.mkdir(parents=True, exist_ok=True)
            if not self._daemon_alive(client):
                self._control_run(card_id, client, ["-d"], None, "-d")
            self._tell(
                card_id,
                client,
                f"set_default_device_pinned_mem_limit 0 {client.memory_limit_mib}M",
                f"set_default_active_thread_percentage {client.thread_percentage}",
            )
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as err:
            running.retry_at = time.monotonic() + self._settings.retry_seconds
            log.error("MPS control daemon of card %s did not start: %s", card_id, err)
            self._on_health(card_id, f"MPS control daemon failed to start: {err}")
            return
        card = self._cards().get(card_id)
        if card is not None and client.memory_limit_mib * request.replicas > card.memory_bytes >> 20:
            log.warning(
                "card %s: %d replicas of %d MiB are more than its %d MiB: clients may run out of memory",
                card_id,
                request.replicas,
                client.memory_limit_mib,
                card.memory_bytes >> 20,
            )
        running.healthy = True
        self._clients[card_id] = client
        log.info(
            "MPS control daemon of card %s up: %d MiB and %d%% of the threads per client",
            card_id,
            client.memory_limit_mib,
            client.thread_percentage,
        )
        self._on_health(card_id, None)

    def _quit(self, card_id: str) -> None:
        running = self._running.pop(card_id)
        self._clients.pop(card_id, None)
        if not self._daemon_alive(running.client):
            return
        try:
            self._tell(card_id, running.client, "quit")
            log.info("MPS control daemon of card %s stopped: the card is no longer shared by MPS", card_id)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as err:
            log.warning("MPS control daemon of card %s did not quit: %s", card_id, err)
        self._on_health(card_id, None)
