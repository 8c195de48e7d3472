"""PluginServer: one pool's gRPC server on its unix socket, and its registration lifecycle.

Order matters (KUBELET.md §2): bind and serve first, check our own socket answers, then Register,
because kubelet dials us back inside Register. After a kubelet restart our socket file is gone and the
old streams are dead, so a restart always rebuilds the whole gRPC server on a fresh socket before
registering again; this also guarantees kubelet never sees two live streams for one resource. A
failed registration is retried with exponential back-off on the same server until it succeeds, the
server is asked to restart, or it is stopped. All of this runs in one lifecycle thread per pool so a
slow kubelet never blocks the daemon or the other pools.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.kubelet.registration import RegistrationError, register
from hcs_deviceplugin.kubelet.watch import file_identity
from hcs_deviceplugin.model import Pool, Unit
from hcs_deviceplugin.plugin.servicer import AllocateListener, DevicePluginServicer, EditsFunction
from hcs_deviceplugin.plugin.sockets import (
    prepare_socket_path,
    remove_socket,
    socket_answers,
    socket_name_for,
)
from hcs_deviceplugin.plugin.state import PoolState

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
STREAM_THREADS = 16


class RegistrationStatus(enum.StrEnum):
    STARTING = "starting"
    REGISTERED = "registered"
    RETRYING = "retrying"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off for registration retries, in seconds."""

    initial: float = 0.1
    maximum: float = 5.0
    factor: float = 2.0

    def next(self, current: float) -> float:
        return min(current * self.factor, self.maximum)


@dataclass(frozen=True)
class ServerStatus:
    """What the daemon's report and metrics need to know about one server."""

    pool: str
    resource_name: str
    socket: str
    status: RegistrationStatus
    registrations: int
    server_generation: int
    open_streams: int
    last_error: str


class PluginServer:
    """Serves one pool. ``update`` changes what it advertises without touching socket or stream."""

    def __init__(
        self,
        pool: Pool,
        units: Sequence[Unit],
        plugin_dir: Path,
        edits: EditsFunction,
        kubelet_socket: Path | None = None,
        on_allocate: AllocateListener | None = None,
        on_status: Callable[[], None] | None = None,
        backoff: Backoff | None = None,
        interceptors: Sequence[grpc.ServerInterceptor[Any, Any]] = (),
        topology: Topology | None = None,
    ) -> None:
        self.state = PoolState(pool, units)
        if topology is not None:
            self.state.update(pool, units, topology)
        self._interceptors = tuple(interceptors)
        self.plugin_dir = plugin_dir
        self.socket_path = plugin_dir / socket_name_for(pool.resource_name)
        self.kubelet_socket = kubelet_socket or plugin_dir / "kubelet.sock"
        self.resource_name = pool.resource_name
        self._edits = edits
        self._on_allocate = on_allocate
        self._on_status = on_status
        self._backoff = backoff or Backoff()
        self._lock = threading.Lock()
        self._restart_requested = threading.Event()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._registered = threading.Event()
        self._server: grpc.Server | None = None
        self._servicer: DevicePluginServicer | None = None
        self._status = RegistrationStatus.STARTING
        self._registrations = 0
        self._generation = 0
        self._last_error = ""
        self._bound_identity: tuple[int, int, int] | None = None
        self._thread = threading.Thread(target=self._lifecycle, name=f"plugin-{pool.name}", daemon=True)

    # -- control, called by the daemon -------------------------------------------------------

    def start(self) -> None:
        self._restart_requested.set()
        self._wake.set()
        self._thread.start()

    def request_restart(self, reason: str) -> None:
        """Rebuild the gRPC server and register again (kubelet restarted, socket removed, ...)."""
        log.info("pool %s: restart requested: %s", self.state.snapshot.pool.name, reason)
        self._registered.clear()
        self._restart_requested.set()
        self._wake.set()

    def update(self, pool: Pool, units: Sequence[Unit], topology: Topology | None = None) -> bool:
        """Advertise new units on the live stream; True if the advertised list changed."""
        if pool.resource_name != self.resource_name:
            raise ValueError("resource name changed: the daemon must replace the server instead")
        return self.state.update(pool, units, topology)

    def stop(self, drain: bool = False) -> None:
        """Stop serving and remove our socket.

        ``drain`` first advertises an empty list (a removed pool's capacity drops at once instead
        of lingering as Unhealthy for kubelet's 5-minute grace); a daemon shutdown does not drain,
        so a restarting daemon does not make kubelet forget devices that pods hold.
        """
        if drain and self._servicer is not None and self._servicer.open_streams > 0:
            self.state.update(self.state.snapshot.pool, ())
            self.state.wait_delivered(self.state.snapshot.version, timeout=1.0)
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._teardown()
        self._set_status(RegistrationStatus.STOPPED)

    def check_socket(self) -> None:
        """Restart if our registered socket file was removed or replaced behind our back."""
        with self._lock:
            bound = self._bound_identity
        if not self._registered.is_set() or bound is None:
            return  # starting or rebuilding: the lifecycle thread owns the socket right now
        if file_identity(self.socket_path) != bound:
            self.request_restart(f"socket {self.socket_path.name} removed or replaced")

    def wait_registered(self, timeout: float) -> bool:
        return self._registered.wait(timeout)

    @property
    def registered(self) -> bool:
        return self._registered.is_set()

    def status(self) -> ServerStatus:
        with self._lock:
            servicer = self._servicer
            return ServerStatus(
                pool=self.state.snapshot.pool.name,
                resource_name=self.resource_name,
                socket=str(self.socket_path),
                status=self._status,
                registrations=self._registrations,
                server_generation=self._generation,
                open_streams=servicer.open_streams if servicer is not None else 0,
                last_error=self._last_error,
            )

    # -- lifecycle thread ----------------------------------------------------------------------

    def _lifecycle(self) -> None:
        delay = self._backoff.initial
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                if self._restart_requested.is_set():
                    self._restart_requested.clear()
                    self._registered.clear()
                    self._rebuild()
                if not self._registered.is_set():
                    register(self.kubelet_socket, self.socket_path.name, self.resource_name)
                    self._mark_registered()
                delay = self._backoff.initial
            except Exception as exc:
                self._record_failure(exc)
                if self._stopping.wait(0) or self._wake.wait(delay):
                    continue  # woken early: a restart request or stop; handle it now
                delay = self._backoff.next(delay)
                self._wake.set()

    def _rebuild(self) -> None:
        """Stop any previous server (ending its streams) and serve afresh on our socket."""
        self._teardown()
        prepare_socket_path(self.socket_path)
        servicer = DevicePluginServicer(self.state, self._edits, self._on_allocate, lambda _n: self._notify())
        server = grpc.server(
            interceptors=list(self._interceptors),
            thread_pool=ThreadPoolExecutor(
                max_workers=STREAM_THREADS, thread_name_prefix=f"grpc-{self.socket_path.stem}"
            ),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        pb_grpc.add_DevicePluginServicer_to_server(servicer, server)
        server.add_insecure_port(f"unix:{self.socket_path}")
        server.start()
        if not socket_answers(self.socket_path, timeout=5.0):
            server.stop(None)
            raise RuntimeError(f"own socket {self.socket_path} does not answer after start")
        with self._lock:
            self._server = server
            self._servicer = servicer
            self._generation += 1
            self._bound_identity = file_identity(self.socket_path)
        log.info("pool %s: serving on %s", self.state.snapshot.pool.name, self.socket_path)

    def _teardown(self) -> None:
        with self._lock:
            server, servicer = self._server, self._servicer
            self._server = None
            self._servicer = None
        if servicer is not None:
            servicer.close()
        if server is not None:
            server.stop(grace=0.2).wait(timeout=5)
            remove_socket(self.socket_path)

    def _mark_registered(self) -> None:
        with self._lock:
            self._registrations += 1
            self._status = RegistrationStatus.REGISTERED
            self._last_error = ""
        self._registered.set()
        log.info("pool %s: registered %s with kubelet", self.state.snapshot.pool.name, self.resource_name)
        self._notify()

    def _record_failure(self, exc: Exception) -> None:
        message = str(exc) if isinstance(exc, RegistrationError) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._status = RegistrationStatus.RETRYING
            self._last_error = message
        log.warning("pool %s: %s (will retry)", self.state.snapshot.pool.name, message)
        self._notify()

    def _set_status(self, status: RegistrationStatus) -> None:
        with self._lock:
            self._status = status
        self._notify()

    def _notify(self) -> None:
        if self._on_status is not None:
            self._on_status()
