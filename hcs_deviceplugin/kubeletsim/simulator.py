"""The kubelet simulator facade: one object a test starts, drives, restarts and reads back.

It owns every piece of mutable state behind one re-entrant lock whose condition is notified on each
change (register, stream open, snapshot, stream end, allocation), so tests wait on conditions instead
of sleeping. Each ``start()`` begins a new *session* (one simulated kubelet process); callbacks from
plugin connections of an older session are ignored, which is what makes restarts race-free.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from hcs_deviceplugin.api.podresources.v1 import api_pb2_grpc as pr_grpc
from hcs_deviceplugin.kubeletsim import checkpoint
from hcs_deviceplugin.kubeletsim.allocations import AllocationTable, choose_devices, group_by_numa, pod_uid
from hcs_deviceplugin.kubeletsim.devices import HEALTHY, ResourceTable
from hcs_deviceplugin.kubeletsim.endpoint import PluginClient, describe_rpc_error, rpc_error_text
from hcs_deviceplugin.kubeletsim.podresources import PodResourcesServicer
from hcs_deviceplugin.kubeletsim.records import (
    AllocationError,
    AllocationRecord,
    RegisterRecord,
    ResourceView,
)
from hcs_deviceplugin.kubeletsim.registration import RegistrationError, RegistrationServicer
from hcs_deviceplugin.kubeletsim.sockets import UnixServer, remove_sockets, unlink_socket
from hcs_deviceplugin.kubeletsim.timeline import Kind, TimelineEvent

log = logging.getLogger(__name__)

KUBELET_SOCKET_NAME = "kubelet.sock"
DIAL_TIMEOUT = 10.0
"""Kubelet's blocking-dial timeout for a registering plugin."""
STREAM_JOIN_TIMEOUT = 2.0
REGISTRATION_WORKERS = 16
POD_RESOURCES_WORKERS = 4

SnapshotListener = Callable[[str, list[dp.Device], float], None]
"""Called with (resource, devices, time.monotonic() at receipt) for every ListAndWatch message."""


class _Session:
    """One simulated kubelet process: its servers and every plugin client it dialed and not yet dropped."""

    def __init__(self) -> None:
        self.servers: list[UnixServer] = []
        self.pod_resources: UnixServer | None = None
        self.clients: set[PluginClient] = set()
        self.closed = False

    def all_servers(self) -> list[UnixServer]:
        return [*self.servers, *([self.pod_resources] if self.pod_resources is not None else [])]


def _rpc_failure(what: str, exc: grpc.RpcError) -> AllocationError:
    """Kubelet's admission error for a failed plugin call, keeping the plugin's status for tests."""
    code, details = describe_rpc_error(exc)
    return AllocationError(f"{what}: {rpc_error_text(code, details)}", code=code, details=details)


class KubeletSimulator:
    """A kubelet devicemanager speaking the real v1beta1 and pod-resources v1 APIs over unix sockets."""

    def __init__(
        self,
        plugin_dir: Path,
        pod_resources_socket: Path | None = None,
        checkpoint_path: Path | None = None,
        grace_period: float = 300.0,
        use_preferred_allocation: bool = True,
        dial_timeout: float = DIAL_TIMEOUT,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.pod_resources_socket = Path(pod_resources_socket) if pod_resources_socket is not None else None
        self.checkpoint_path = (
            Path(checkpoint_path)
            if checkpoint_path is not None
            else self.plugin_dir / checkpoint.CHECKPOINT_NAME
        )
        self.grace_period = grace_period
        self.use_preferred_allocation = use_preferred_allocation
        self.dial_timeout = dial_timeout
        self.checkpoint_error: str | None = None
        """Why the last start ignored the checkpoint (kubelet logs and carries on), or None."""
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._admission = threading.Lock()
        self._table = ResourceTable(grace_period)
        self._allocations = AllocationTable()
        self._registrations: list[RegisterRecord] = []
        self._listeners: list[SnapshotListener] = []
        self._session: _Session | None = None
        self._timeline: list[TimelineEvent] = []
        self.pod_resources_delay = 0.0
        """Seconds each pod-resources call waits before answering (a slow kubelet)."""
        self.pod_resources_down = False
        """While True every pod-resources call fails UNAVAILABLE (a kubelet that cannot answer)."""

    # ------------------------------------------------------------------ lifecycle

    @property
    def kubelet_socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET_NAME

    @property
    def running(self) -> bool:
        with self._lock:
            return self._session is not None

    def __enter__(self) -> KubeletSimulator:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Kubelet start: mkdir, wipe sockets, load the checkpoint, serve Registration (and pod-resources)."""
        with self._lock:
            if self._session is not None:
                raise RuntimeError("kubelet simulator is already running")
            self.plugin_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
            remove_sockets(self.plugin_dir)
            self._load_checkpoint_locked()
            session = _Session()
            try:
                session.servers.append(
                    UnixServer(self.kubelet_socket, self._add_registration_service, REGISTRATION_WORKERS)
                )
                if self.pod_resources_socket is not None:
                    session.pod_resources = self._serve_pod_resources(self.pod_resources_socket)
            except BaseException:
                for server in session.all_servers():
                    server.stop()
                raise
            self._session = session
            self._changed.notify_all()

    def stop(self) -> None:
        """Kubelet exit: stop serving, drop every plugin connection, remove the sockets. Idempotent."""
        with self._lock:
            session = self._session
            if session is None:
                return
            self._session = None
            session.closed = True
            clients = list(session.clients)
            session.clients.clear()
            now = time.monotonic()
            for client in self._table.stop_all(now):
                self._note(Kind.END, client.resource, now=now, endpoint=client.socket_path)
            self._changed.notify_all()
        for server in session.all_servers():
            server.stop()
        for client in clients:
            client.close()
        for client in clients:
            client.join(STREAM_JOIN_TIMEOUT)

    def restart(self) -> None:
        """Kubelet restart (KUBELET.md §2): plugins see their sockets vanish and must register again.

        Allocations come back from the checkpoint; every checkpointed resource is a stopped endpoint
        with capacity 0 until its plugin re-registers, and is dropped after the grace period if not.
        """
        self.stop()
        self.start()

    def _add_registration_service(self, server: grpc.Server) -> None:
        servicer = RegistrationServicer(self.plugin_dir, self._connect_plugin, self._record_registration)
        dp_grpc.add_RegistrationServicer_to_server(servicer, server)

    def _add_pod_resources_service(self, server: grpc.Server) -> None:
        servicer = PodResourcesServicer(self.allocations, self._allocatable, self._pod_resources_fault)
        pr_grpc.add_PodResourcesListerServicer_to_server(servicer, server)

    def _serve_pod_resources(self, path: Path) -> UnixServer:
        path.parent.mkdir(parents=True, exist_ok=True)
        unlink_socket(path)
        return UnixServer(path, self._add_pod_resources_service, POD_RESOURCES_WORKERS)

    def remove_pod_resources_socket(self) -> None:
        """Pod-resources gone altogether: its server stops and its socket file is removed, so callers
        get connection errors rather than UNAVAILABLE answers, until :meth:`restore_pod_resources_socket`
        (or a kubelet restart) serves it again."""
        with self._lock:
            session = self._session
            server = session.pod_resources if session is not None else None
            if session is not None:
                session.pod_resources = None
        if server is not None:
            server.stop()

    def restore_pod_resources_socket(self) -> None:
        """Serve pod-resources again after :meth:`remove_pod_resources_socket`."""
        with self._lock:
            session = self._session
            if session is None or session.pod_resources is not None or self.pod_resources_socket is None:
                return
            session.pod_resources = self._serve_pod_resources(self.pod_resources_socket)

    def _pod_resources_fault(self) -> tuple[float, bool]:
        """(delay before answering, whether to fail UNAVAILABLE), read per call."""
        return self.pod_resources_delay, self.pod_resources_down

    def _load_checkpoint_locked(self) -> None:
        try:
            saved = checkpoint.read(self.checkpoint_path)
            self.checkpoint_error = None
        except checkpoint.CheckpointError as exc:
            log.warning("ignoring checkpoint %s: %s", self.checkpoint_path, exc)
            self.checkpoint_error = str(exc)
            saved = None
        now = time.monotonic()
        self._allocations.replace(saved.allocations if saved else ())
        self._table.restore(saved.registered_devices if saved else (), now)

    def _save_locked(self) -> None:
        """Write the checkpoint (kubelet does on every snapshot and allocation change)."""
        try:
            checkpoint.write(
                self.checkpoint_path, self._allocations.records(), self._table.registered_devices()
            )
        except OSError as exc:
            log.warning("cannot write checkpoint %s: %s", self.checkpoint_path, exc)

    # ------------------------------------------------------------------ registration and streams

    def _connect_plugin(self, resource: str, socket_path: str) -> None:
        """Register's second half: dial, GetDevicePluginOptions, replace the endpoint, start ListAndWatch."""
        client = PluginClient(resource, socket_path)
        with self._lock:
            session = self._session
            if session is not None:
                session.clients.add(client)
        if session is None:
            client.close()
            raise RegistrationError("kubelet is shutting down")
        try:
            options = client.connect(self.dial_timeout)
        except RegistrationError:
            with self._lock:
                session.clients.discard(client)
            client.close()
            raise
        with self._lock:
            installed = not session.closed
            if installed:
                self._table.install(client, options)
                # Noted here, not when the Register call returns: the stream below may open first.
                self._note(Kind.REGISTER, resource, endpoint=socket_path)
                self._changed.notify_all()
        if not installed:
            client.close()
            raise RegistrationError("kubelet is shutting down")
        client.start_stream(self._stream_opened, self._snapshot_received, self._stream_ended)

    def _record_registration(self, record: RegisterRecord) -> None:
        with self._lock:
            self._registrations.append(record)
            self._changed.notify_all()

    def _is_live(self, client: PluginClient) -> bool:
        return self._session is not None and client in self._session.clients

    def _stream_opened(self, client: PluginClient) -> None:
        with self._lock:
            if self._is_live(client):
                self._table.stream_opened(client.resource)
                self._note(Kind.OPEN, client.resource, endpoint=client.socket_path)
                self._changed.notify_all()

    def _snapshot_received(self, client: PluginClient, devices: list[dp.Device], received: float) -> None:
        with self._lock:
            if not self._is_live(client):
                return
            self._table.apply_snapshot(client, devices)
            if self._table.is_current(client):
                self._note(
                    Kind.LIST,
                    client.resource,
                    (d.ID for d in devices),
                    received,
                    endpoint=client.socket_path,
                    unhealthy=(d.ID for d in devices if d.health != HEALTHY),
                )
            self._save_locked()
            listeners = list(self._listeners)
            self._changed.notify_all()
        for listener in listeners:
            try:
                listener(client.resource, devices, received)
            except Exception:
                log.exception("snapshot listener failed")

    def _stream_ended(self, client: PluginClient, error: grpc.RpcError | None) -> None:
        with self._lock:
            if self._session is not None and client in self._session.clients:
                self._session.clients.discard(client)
                self._table.stream_ended(client.resource)
                if self._table.disconnect(client, time.monotonic()):
                    self._note(Kind.END, client.resource, endpoint=client.socket_path)
                    log.info("ListAndWatch for %s ended (%s): endpoint stopped", client.resource, error)
                self._changed.notify_all()
        client.close()

    # ------------------------------------------------------------------ reading state

    @property
    def registrations(self) -> list[RegisterRecord]:
        """Every Register call received, in the order they completed."""
        with self._lock:
            return list(self._registrations)

    def _expire_locked(self) -> None:
        if self._table.expire(time.monotonic()):
            self._save_locked()
            self._changed.notify_all()

    def resources(self) -> dict[str, ResourceView]:
        with self._lock:
            self._expire_locked()
            views = {name: self._table.view(name) for name in self._table.names()}
            return {name: view for name, view in views.items() if view is not None}

    def resource(self, name: str) -> ResourceView:
        """One resource's view; KeyError if kubelet does not know it (never registered, or expired)."""
        with self._lock:
            self._expire_locked()
            view = self._table.view(name)
        if view is None:
            raise KeyError(name)
        return view

    def timeline(self) -> list[TimelineEvent]:
        """Every registration, stream open, advertisement, endpoint stop, allocation and release so
        far, ordered by time (a LIST's time is when its stream received it; see timeline.py)."""
        with self._lock:
            return sorted(self._timeline, key=lambda e: e.time)

    def _note(
        self,
        kind: Kind,
        resource: str,
        ids: Iterable[str] = (),
        now: float | None = None,
        endpoint: str = "",
        unhealthy: Iterable[str] = (),
    ) -> None:
        """Append to the timeline; the caller holds the lock, so the order is the order of state changes."""
        when = time.monotonic() if now is None else now
        self._timeline.append(
            TimelineEvent(when, kind, resource, frozenset(ids), endpoint, frozenset(unhealthy))
        )

    def allocations(self) -> list[AllocationRecord]:
        with self._lock:
            return self._allocations.records()

    def _allocatable(self) -> Mapping[str, Mapping[str, Sequence[int]]]:
        with self._lock:
            self._expire_locked()
            return self._table.allocatable()

    def add_snapshot_listener(self, callback: SnapshotListener) -> None:
        with self._lock:
            self._listeners.append(callback)

    def remove_snapshot_listener(self, callback: SnapshotListener) -> None:
        with self._lock:
            self._listeners.remove(callback)

    def wait_for(
        self, predicate: Callable[[KubeletSimulator], bool], timeout: float = 10.0, what: str = ""
    ) -> None:
        """Block until ``predicate(self)`` holds, re-checking on every state change.

        The predicate runs under the simulator's lock and should only read state. A KeyError from it
        (``resource(name)`` before the plugin registered) counts as "not yet", since resources appear
        asynchronously. Waits are also cut at the next grace-period deadline, since expiry is lazy
        and notifies no one by itself.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self._holds(predicate):
                now = time.monotonic()
                if now >= deadline:
                    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
                self._expire_locked()
                wake = deadline
                expiry = self._table.next_expiry()
                if expiry is not None:
                    wake = min(wake, expiry)
                self._changed.wait(max(wake - now, 0.0) + 0.001)

    def _holds(self, predicate: Callable[[KubeletSimulator], bool]) -> bool:
        try:
            return predicate(self)
        except KeyError:
            return False

    # ------------------------------------------------------------------ admission

    def allocate(
        self, pod: str, container: str, resource: str, count: int, namespace: str = "default"
    ) -> AllocationRecord:
        """Admit one container's request for ``count`` devices of ``resource``, as kubelet does.

        Admissions are serialized (kubelet admits one pod at a time); RPCs run outside the state lock
        so snapshots keep flowing while a plugin answers.
        """
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        key = (namespace, pod, container, resource)
        with self._admission:
            with self._lock:
                session = self._session
                if session is None:
                    raise AllocationError("kubelet is not running")
                existing = self._allocations.get(key)
                if existing is not None:
                    if len(existing.device_ids) != count:
                        raise AllocationError(
                            f'pod "{existing.pod_uid}" container "{container}" changed request for resource '
                            f'"{resource}" from {len(existing.device_ids)} to {count}'
                        )
                    return existing
                client, options, available = self._candidates_locked(resource, count)
            preferred: list[str] | None = None
            if options.get_preferred_allocation_available and self.use_preferred_allocation:
                try:
                    answer = client.get_preferred_allocation(sorted(available), [], count)
                except grpc.RpcError as exc:
                    raise _rpc_failure(
                        "device plugin GetPreferredAllocation rpc failed with err", exc
                    ) from exc
                preferred = (
                    list(answer.container_responses[0].deviceIDs) if answer.container_responses else []
                )
            chosen = choose_devices(available, count, preferred)
            try:
                response = client.allocate(chosen)
            except grpc.RpcError as exc:
                raise _rpc_failure("device plugin Allocate rpc failed with err", exc) from exc
            if not response.container_responses:
                raise AllocationError(f"no containers return in allocation response {response}")
            with self._lock:
                if self._session is not session:
                    raise AllocationError("kubelet restarted during admission")
                numa = {dev: self._table.numa_of(resource, dev) for dev in chosen}
                record = AllocationRecord(
                    namespace=namespace,
                    pod=pod,
                    container=container,
                    resource=resource,
                    device_ids=chosen,
                    response=response.container_responses[0],
                    pod_uid=pod_uid(namespace, pod),
                    devices_by_numa=group_by_numa(chosen, numa),
                )
                self._allocations.add(record)
                self._note(Kind.ALLOC, resource, chosen)
                self._save_locked()
                self._changed.notify_all()
            return record

    def _candidates_locked(
        self, resource: str, count: int
    ) -> tuple[PluginClient, dp.DevicePluginOptions, set[str]]:
        """Kubelet's checks before choosing devices, with its error texts; returns what to choose from."""
        self._expire_locked()
        healthy = self._table.healthy(resource)
        if healthy is None:
            raise AllocationError(f"cannot allocate unregistered device {resource}")
        if not healthy:
            raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        available = healthy - self._allocations.in_use(resource)
        if len(available) < count:
            raise AllocationError(
                f"requested number of devices unavailable for {resource}. "
                f"Requested: {count}, Available: {len(available)}"
            )
        client = self._table.current_client(resource)
        options = self._table.options(resource)
        if client is None or options is None:
            raise AllocationError(f"endpoint {resource} has been stopped")
        return client, options, available

    def start_container(self, pod: str, container: str, namespace: str = "default") -> None:
        """Container start: PreStartContainer (30 s deadline) for each resource whose plugin asks for it."""
        calls: list[tuple[PluginClient, AllocationRecord]] = []
        with self._lock:
            for record in self._allocations.records():
                if (record.namespace, record.pod, record.container) != (namespace, pod, container):
                    continue
                if not self._table.has(record.resource):
                    raise AllocationError(
                        f"endpoint not found in cache for a registered resource: {record.resource}"
                    )
                options = self._table.options(record.resource)
                if options is None or not options.pre_start_required:
                    continue
                client = self._table.current_client(record.resource)
                if client is None:
                    raise AllocationError(f"endpoint {record.resource} has been stopped")
                calls.append((client, record))
        for client, record in calls:
            try:
                client.pre_start_container(record.device_ids)
            except grpc.RpcError as exc:
                raise _rpc_failure("device plugin PreStartContainer rpc failed with err", exc) from exc

    def free_pod(self, pod: str, namespace: str = "default") -> None:
        """The pod is gone: its devices become available again (and leave the checkpoint)."""
        with self._lock:
            for record in self._allocations.records():
                if (record.namespace, record.pod) == (namespace, pod):
                    self._note(Kind.FREE, record.resource, record.device_ids)
            if self._allocations.free_pod(namespace, pod):
                self._save_locked()
                self._changed.notify_all()
