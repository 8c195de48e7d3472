"""PluginServer: one pool's gRPC server on its unix socket, and its registration lifecycle.

Order matters (KUBELET.md §2): bind and serve first, then Register, because kubelet dials us back
inside Register. Go plugins dial their own socket before registering because their Serve starts in a
goroutine; ours listens before :meth:`RpcServer.start` returns, so kubelet's dial is queued by the
kernel even before the accept thread runs, and dialling ourselves would prove nothing (it cost every
pool an accepted connection and a reader thread at start). What can still go wrong between bind and
Register, our socket file removed or replaced, is caught by comparing the file's identity with the
one we bound just before registering. After a kubelet restart our socket file is gone and the
old streams are dead, so a restart always rebuilds the whole gRPC server on a fresh socket before
registering again; this also guarantees kubelet never sees two live streams for one resource. A
failed registration is retried with exponential back-off on the same server until it succeeds, the
server is asked to restart, or it is stopped. All of this runs in one lifecycle thread per pool so a
slow kubelet never blocks the daemon or the other pools.

Faults this must survive: a rebuild that fails (something at our socket path, a bind error) stays
pending and is retried, so we never Register a socket nobody serves; one kubelet restart is seen
twice (our socket vanishes, then kubelet.sock is re-created) and must cost one rebuild and one
Register, not two; a kubelet hanging inside Register must not delay a shutdown.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.kubelet.registration import (
    KubeletSocketMissing,
    RegisterCall,
    RegistrationError,
    register,
)
from hcs_deviceplugin.kubelet.watch import FileIdentity, file_identity
from hcs_deviceplugin.model import Pool, Unit
from hcs_deviceplugin.plugin.servicer import (
    AllocateListener,
    DevicePluginServicer,
    EditsFunction,
)
from hcs_deviceplugin.plugin.sockets import (
    prepare_socket_path,
    remove_socket,
    socket_name_for,
)
from hcs_deviceplugin.plugin.state import PoolState
from hcs_deviceplugin.plugin.topology import PoolTopology
from hcs_deviceplugin.rpc.calls import Interceptor
from hcs_deviceplugin.rpc.server import RpcServer

log = logging.getLogger(__name__)

DRAIN_SECONDS = 1.0
"""How long a draining stop waits for the empty list to reach a stream."""
DRAIN_GRACE_SECONDS = 0.2
"""Grace for in-flight calls when a server is replaced or drained."""
STOP_JOIN_SECONDS = 0.1
"""How long stop() waits for the lifecycle thread; mid-rebuild it cleans up after itself."""


class RegistrationStatus(enum.StrEnum):
    STARTING = "starting"
    REGISTERED = "registered"
    RETRYING = "retrying"
    STOPPED = "stopped"


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class Backoff:
    """Exponential back-off for registration retries, in seconds."""

    initial: float = 0.1
    maximum: float = 5.0
    factor: float = 2.0

    def next(self, current: float) -> float:
        return min(current * self.factor, self.maximum)


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
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
    registered_kubelet: FileIdentity | None = None
    """Identity of the kubelet.sock the last successful Register went to (None if none yet)."""


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
        interceptors: Sequence[Interceptor] = (),
        topology: PoolTopology | None = None,
        on_registered: Callable[[int], None] | None = None,
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
        self._on_registered = on_registered
        self._backoff = backoff or Backoff()
        self._lock = threading.Lock()
        # A restart is pending while _restart_seq > _built_seq; only a successful rebuild catches up.
        self._restart_seq = 0
        self._built_seq = 0
        self._registrations_here = 0
        self._registered_kubelet: FileIdentity | None = None
        self._register_call: RegisterCall | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._registered = threading.Event()
        self._server: RpcServer | None = None
        self._servicer: DevicePluginServicer | None = None
        self._status = RegistrationStatus.STARTING
        self._registrations = 0
        self._generation = 0
        self._last_error = ""
        self._bound_identity: tuple[int, int, int] | None = None
        self._thread = threading.Thread(target=self._lifecycle, name=f"plugin-{pool.name}", daemon=True)

    # -- control, called by the daemon -------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._restart_seq += 1
        self._wake.set()
        self._thread.start()

    def request_restart(self, reason: str, kubelet_identity: FileIdentity | None = None) -> None:
        """Rebuild the gRPC server and register again (kubelet restarted, socket removed, ...).

        ``kubelet_identity`` says the request is about a new kubelet.sock (that identity). One kubelet
        restart is seen twice, as our socket vanishing and as kubelet.sock re-created, so such a
        request is folded into what is already under way: dropped if this server, its socket intact,
        registered with that kubelet; only a Register if the server is fresh (built after the last
        restart request) and not yet registered, or a rebuild is already due. A Register in flight to
        another kubelet.sock is cancelled, since that kubelet is gone. Without an identity the request
        always rebuilds.
        """
        name = self.state.snapshot.pool.name
        with self._lock:
            call = self._register_call
            verdict = self._fold_restart_locked(kubelet_identity)
            if verdict == "restart":
                self._restart_seq += 1
                self._registered.clear()
                self._status = RegistrationStatus.STARTING
            stale = call is not None and (verdict == "restart" or call.target != kubelet_identity)
        if verdict == "duplicate":
            log.debug("pool %s: already registered with this kubelet; %s ignored", name, reason)
            return
        if stale and call is not None:
            call.cancel()  # a Register for a server being replaced, or to a kubelet that is gone
        if verdict == "register":
            log.info("pool %s: %s; the pending registration covers it", name, reason)
        else:
            log.info("pool %s: restart requested: %s", name, reason)
        self._wake.set()
        self._notify()

    def _fold_restart_locked(self, kubelet_identity: FileIdentity | None) -> str:
        """What a restart request still needs: "duplicate", "register" or a full "restart"."""
        if kubelet_identity is None:
            return "restart"
        if self._built_seq < self._restart_seq:
            return "register"  # a rebuild is due; the server it builds registers with kubelet.sock then
        if not self._socket_intact_locked():
            return "restart"
        if self._registered.is_set() and self._registered_kubelet == kubelet_identity:
            return "duplicate"
        if self._registrations_here == 0:
            return "register"  # fresh server, not yet registered: registering it is all that is left
        return "restart"  # registered with an older kubelet: its stream may live, so start clean

    def update(self, pool: Pool, units: Sequence[Unit], topology: PoolTopology | None = None) -> bool:
        """Advertise new units on the live stream; True if the advertised list changed."""
        if pool.resource_name != self.resource_name:
            raise ValueError("resource name changed: the daemon must replace the server instead")
        return self.state.update(pool, units, topology)

    def prepare_allocation(self) -> None:
        """Build what GetPreferredAllocation reads of the current snapshot (its topology included)
        now, off any call (see :mod:`.topology`)."""
        self.state.snapshot.prepare_allocation()

    def stop(self, drain: bool = False) -> None:
        """Stop serving and remove our socket.

        ``drain`` first advertises an empty list (a removed pool's capacity drops at once instead
        of lingering as Unhealthy for kubelet's 5-minute grace) and gives calls a short grace; a
        daemon shutdown does not drain, so a restarting daemon does not make kubelet forget devices
        that pods hold, and it returns at once: a Register in flight is cancelled, calls are cut,
        the socket file is removed without waiting for gRPC's shutdown to finish.
        """
        with self._lock:
            servicer = self._servicer
        if drain and servicer is not None and servicer.open_streams > 0:
            self.state.update(self.state.snapshot.pool, ())
            self.state.wait_delivered(self.state.snapshot.version, timeout=DRAIN_SECONDS)
        self._stopping.set()
        self._wake.set()
        with self._lock:
            call = self._register_call
        if call is not None:
            call.cancel()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            # Mid-rebuild the thread may take longer; it then cleans up what it built (see _rebuild).
            self._thread.join(timeout=STOP_JOIN_SECONDS)
        self._teardown(grace=DRAIN_GRACE_SECONDS if drain else None)
        self._set_status(RegistrationStatus.STOPPED)

    def check_socket(self) -> None:
        """Restart if our registered socket file was removed or replaced behind our back."""
        with self._lock:
            bound = self._bound_identity
        if not self._registered.is_set() or bound is None:
            return  # starting or rebuilding: the lifecycle thread checks the socket before Register
        if file_identity(self.socket_path) != bound:
            self.request_restart(f"socket {self.socket_path.name} removed or replaced")

    def connections_accepted(self) -> int:
        """Connections the current socket has accepted (0 while none is served): kubelet holds one."""
        with self._lock:
            server = self._server
        return server.connections_accepted if server is not None else 0

    def wait_registered(self, timeout: float) -> bool:
        return self._registered.wait(timeout)

    @property
    def registered(self) -> bool:
        return self._registered.is_set()

    @property
    def streaming(self) -> bool:
        """Registered, and an open ListAndWatch stream has handed kubelet its first list."""
        with self._lock:
            servicer = self._servicer
        return self._registered.is_set() and servicer is not None and servicer.delivering_streams > 0

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
                registered_kubelet=self._registered_kubelet,
            )

    def _socket_intact_locked(self) -> bool:
        """The server we built still owns our socket file (nobody removed or replaced it)."""
        return (
            self._server is not None
            and self._bound_identity is not None
            and file_identity(self.socket_path) == self._bound_identity
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
                with self._lock:
                    wanted = self._restart_seq
                    rebuild = self._built_seq < wanted
                if rebuild:
                    self._registered.clear()
                    self._rebuild(wanted)
                if not self._registered.is_set():
                    self._register()
                delay = self._backoff.initial
            except Exception as exc:
                if self._stopping.is_set():
                    return  # a Register cancelled by stop(), or a rebuild cut short by it
                self._record_failure(exc)
                if self._wake.wait(delay):
                    continue  # woken early: a restart request, kubelet.sock re-created, or stop
                delay = self._backoff.next(delay)
                self._wake.set()

    def _register(self) -> None:
        """One Register of the current server, cancellable by :meth:`stop` and :meth:`request_restart`.

        Registers only a server built after the last restart request that still owns our socket
        (kubelet may have wiped the directory between our bind and now: then rebuild first).
        """
        with self._lock:
            if self._server is None or self._built_seq < self._restart_seq:
                return  # a rebuild is due (the lifecycle is woken for it) or we are stopping
            if not self._socket_intact_locked():
                self._restart_seq += 1
                self._wake.set()
                log.info("pool %s: socket gone before registering; rebuilding", self.state.snapshot.pool.name)
                return
            kubelet = file_identity(self.kubelet_socket)
            call = RegisterCall(target=kubelet)
            self._register_call = call
        if self._stopping.is_set():
            call.cancel()
        try:
            register(self.kubelet_socket, self.socket_path.name, self.resource_name, call=call)
        except RegistrationError:
            if not call.cancelled or self._stopping.is_set():
                raise
            # request_restart cancelled it (a server being replaced, a kubelet gone) and woke us.
            log.info("pool %s: Register cancelled for a newer restart request", self.state.snapshot.pool.name)
            return
        finally:
            with self._lock:
                self._register_call = None
        self._mark_registered(kubelet)

    def _rebuild(self, wanted: int) -> None:
        """Stop any previous server (ending its streams) and serve afresh on our socket.

        On failure the restart stays pending (``_built_seq`` unchanged), so the lifecycle retries
        the rebuild with back-off instead of registering a socket nobody serves. If :meth:`stop`
        ran meanwhile, the new server is ended here rather than left behind it.
        """
        self._teardown()
        prepare_socket_path(self.socket_path)
        servicer = DevicePluginServicer(self.state, self._edits, self._on_allocate, lambda _n: self._notify())
        server = RpcServer(
            self.socket_path,
            servicer.methods(),
            name=f"plugin-{self.socket_path.stem}",
            interceptors=self._interceptors,
        )
        server.start()  # listening once it returns: kubelet's dial is queued even before an accept
        with self._lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._server = server
                self._servicer = servicer
                self._generation += 1
                self._bound_identity = file_identity(self.socket_path)
                self._built_seq = wanted
                self._registrations_here = 0
        if stopping:
            servicer.close()
            server.stop(0)
            remove_socket(self.socket_path)
            return
        log.info("pool %s: serving on %s", self.state.snapshot.pool.name, self.socket_path)

    def _teardown(self, grace: float | None = DRAIN_GRACE_SECONDS) -> None:
        """End the current server and remove its socket file.

        With a ``grace`` (a rebuild, a drain) in-flight calls get that long and we wait, bounded,
        for gRPC to finish, so the old listener is gone before a new one binds the same path.
        With None (a daemon shutdown) calls are cut and nothing is waited for.
        """
        with self._lock:
            server, servicer = self._server, self._servicer
            self._server = None
            self._servicer = None
            self._bound_identity = None
        if servicer is not None:
            servicer.close()
        if server is not None:
            stopped = server.stop(grace)
            if grace is not None:
                stopped.wait(timeout=grace + 1.0)
            remove_socket(self.socket_path)

    def _mark_registered(self, kubelet: FileIdentity | None) -> None:
        """Count a successful Register (kubelet saw it); call it current unless a restart is due."""
        with self._lock:
            self._registrations += 1
            self._registrations_here += 1
            count = self._registrations
            self._registered_kubelet = kubelet
            current = self._built_seq == self._restart_seq and not self._stopping.is_set()
            if current:
                self._status = RegistrationStatus.REGISTERED
                self._last_error = ""
                self._registered.set()
        log.info("pool %s: registered %s with kubelet", self.state.snapshot.pool.name, self.resource_name)
        if self._on_registered is not None:
            self._on_registered(count)
        self._notify()

    def _record_failure(self, exc: Exception) -> None:
        message = str(exc) if isinstance(exc, RegistrationError) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            repeated = message == self._last_error
            self._status = RegistrationStatus.RETRYING
            self._last_error = message
        if isinstance(exc, KubeletSocketMissing) and repeated:
            log.debug("pool %s: still waiting: %s", self.state.snapshot.pool.name, message)
        else:
            log.warning("pool %s: %s (will retry)", self.state.snapshot.pool.name, message)
        self._notify()

    def _set_status(self, status: RegistrationStatus) -> None:
        with self._lock:
            self._status = status
        self._notify()

    def _notify(self) -> None:
        if self._on_status is not None:
            self._on_status()
