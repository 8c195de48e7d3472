"""The ``v1beta1.DevicePlugin`` gRPC methods for one pool.

Allocate works on in-memory state only (ARCHITECTURE.md invariant 7): it looks the requested ids up
in the pool's current snapshot and asks the owning backend(s) for ContainerEdits, which backends
compute without I/O. Any unknown or unhealthy id fails the whole request with INVALID_ARGUMENT and
changes nothing. The answer is kept with the snapshot, keyed by the request's bytes and holding the
response's bytes, so the same request again (another pod on the same card, an init container, a
retry) costs a dict lookup plus the hold: nothing is parsed or encoded. The method's ``parse`` is
therefore the identity; only a request the book does not know is decoded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as pb
from hcs_deviceplugin.api.wireformat import DecodeError
from hcs_deviceplugin.kubelet.registration import plugin_options
from hcs_deviceplugin.model import ContainerEdits, Health, Pool, Unit
from hcs_deviceplugin.plugin.convert import edits_to_response, list_and_watch_response
from hcs_deviceplugin.plugin.state import Answer, PoolState, Snapshot
from hcs_deviceplugin.rpc.calls import CallContext, Encoded, Method, ServerStream, Unary
from hcs_deviceplugin.rpc.status import Code

log = logging.getLogger(__name__)

MAX_STREAMS = 4
"""ListAndWatch streams one pool serves at once. Kubelet holds one; every open stream holds a thread,
so beyond this the oldest stream is ended for the newest."""
SERVICE = "/v1beta1.DevicePlugin/"
_OPTIONS = Encoded(plugin_options().SerializeToString())
"""GetDevicePluginOptions' answer, the same for every pool and call."""

EditsFunction = Callable[[Pool, Sequence[Unit]], ContainerEdits]
AllocateListener = Callable[[str, Sequence[str]], "Callable[[], None] | None"]
"""Told (pool, ids) before an Allocate answer goes out; may return an undo for a refused answer."""


def _raw(request: bytes) -> bytes:
    """Allocate's ``parse``: the request bytes themselves, the key of the snapshot's answer book.

    ``bytes()`` of a ``bytes`` object is that object (no copy); a transport that handed over a
    buffer instead would get a hashable key all the same."""
    return bytes(request)


class AllocationRejected(Exception):
    """A request named ids this pool cannot hand out."""


def resolve_units(snapshot: Snapshot, ids: Sequence[str]) -> list[Unit]:
    """Map requested ids to healthy units of the snapshot or explain which ids are wrong."""
    units: list[Unit] = []
    unknown: list[str] = []
    unhealthy: list[str] = []
    for uid in ids:
        unit = snapshot.unit(uid)
        if unit is None:
            unknown.append(uid)
        elif unit.health is not Health.HEALTHY:
            unhealthy.append(uid)
        else:
            units.append(unit)
    problems = []
    if unknown:
        problems.append(f"unknown device ids {unknown}")
    if unhealthy:
        problems.append(f"unhealthy device ids {unhealthy}")
    if problems:
        raise AllocationRejected(f"pool {snapshot.pool.name}: " + "; ".join(problems))
    if not units:
        raise AllocationRejected(f"pool {snapshot.pool.name}: empty device id list")
    pool = snapshot.pool
    if pool.sharing and len(units) > 1:
        raise AllocationRejected(
            f"pool {pool.name}: {len(units)} replicas asked for one container, but the pool shares its "
            f"cards by {pool.sharing!r}, where each replica is one limited client: ask for 1"
        )
    return units


class _Stream:
    """One open ListAndWatch: ``end()`` makes its loop return and cancels the call (a client that
    never reads may leave our thread blocked in a send; the cancel frees it)."""

    def __init__(self, context: CallContext) -> None:
        self.context = context
        self.ended = threading.Event()
        self.delivered = False
        """Its first list has been handed to the RPC server (the generator was asked for the next)."""

    def end(self) -> None:
        self.ended.set()
        self.context.cancel()


class DevicePluginServicer:
    """Serves one pool for the lifetime of one gRPC server instance.

    The pool's :class:`PoolState` outlives this object; ``close()`` ends this instance's streams
    (used when the server is rebuilt after a kubelet restart or the pool is removed).
    """

    def __init__(
        self,
        state: PoolState,
        edits: EditsFunction,
        on_allocate: AllocateListener | None = None,
        on_stream: Callable[[int], None] | None = None,
    ) -> None:
        self._state = state
        self._edits = edits
        self._on_allocate = on_allocate
        self._on_stream = on_stream
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._streams: list[_Stream] = []

    def methods(self) -> dict[str, Method]:
        """The ``v1beta1.DevicePlugin`` service, for the RPC server."""
        return {
            SERVICE + "GetDevicePluginOptions": Unary(pb.Empty.FromString, self.GetDevicePluginOptions),
            SERVICE + "ListAndWatch": ServerStream(pb.Empty.FromString, self.ListAndWatch),
            SERVICE + "Allocate": Unary(_raw, self.Allocate),
            SERVICE + "GetPreferredAllocation": Unary(
                pb.PreferredAllocationRequest.FromString, self.GetPreferredAllocation
            ),
            SERVICE + "PreStartContainer": Unary(
                pb.PreStartContainerRequest.FromString, self.PreStartContainer
            ),
        }

    def close(self) -> None:
        self._closed.set()
        self._state.wake_all()

    @property
    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    @property
    def delivering_streams(self) -> int:
        """Open streams that have handed kubelet a list: kubelet knows the pool's devices."""
        with self._lock:
            return sum(1 for stream in self._streams if stream.delivered)

    def _open_stream(self, context: CallContext) -> _Stream:
        """Register a new stream, ending the oldest ones beyond :data:`MAX_STREAMS` (newest wins)."""
        stream = _Stream(context)
        with self._lock:
            self._streams.append(stream)
            evicted = self._streams[:-MAX_STREAMS]
            del self._streams[:-MAX_STREAMS]
            count = len(self._streams)
        for old in evicted:
            log.warning(
                "pool %s: more than %d ListAndWatch streams; ending the oldest", self._pool(), MAX_STREAMS
            )
            old.end()
        if evicted:
            self._state.wake_all()
        if self._on_stream is not None:
            self._on_stream(count)
        return stream

    def _close_stream(self, stream: _Stream) -> None:
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)
            count = len(self._streams)
        if self._on_stream is not None:
            self._on_stream(count)

    def _first_delivered(self, stream: _Stream) -> None:
        with self._lock:
            stream.delivered = True
            count = len(self._streams)
        if self._on_stream is not None:
            self._on_stream(count)

    def _pool(self) -> str:
        return self._state.snapshot.pool.name

    def GetDevicePluginOptions(self, request: pb.Empty, context: CallContext) -> Encoded:
        return _OPTIONS

    def ListAndWatch(self, request: pb.Empty, context: CallContext) -> Iterator[pb.ListAndWatchResponse]:
        context.add_callback(self._state.wake_all)
        stream = self._open_stream(context)
        try:
            seen = -1
            last_sent: tuple[Unit, ...] | None = None
            while True:
                snapshot = self._state.wait_for_change(
                    seen, lambda: self._closed.is_set() or stream.ended.is_set() or not context.is_active()
                )
                if snapshot is None:
                    final = self._state.snapshot
                    if self._closed.is_set() and context.is_active() and final.units != last_sent:
                        # Closed with a list not sent yet (a drain's empty one, when this thread
                        # woke only after the close): it goes out before the stream ends.
                        yield list_and_watch_response(final.units)
                        self._state.note_delivered(final.version)
                    return
                seen = snapshot.version
                if snapshot.units == last_sent:
                    continue
                last_sent = snapshot.units
                yield list_and_watch_response(snapshot.units)
                self._state.note_delivered(snapshot.version)
                if not stream.delivered:
                    self._first_delivered(stream)
        finally:
            self._close_stream(stream)

    def Allocate(self, request: bytes, context: CallContext) -> Encoded:
        """``request`` is the ``AllocateRequest`` as it came off the wire (see :func:`_raw`)."""
        snapshot = self._state.snapshot
        answer = snapshot.answers.get(request)
        if answer is None:
            answer = self._answer(snapshot, request, context)
            snapshot.remember(request, answer)
        containers = answer.containers
        undo = []
        if self._on_allocate is not None:
            for ids in containers:
                release = self._on_allocate(snapshot.pool.name, ids)
                if release is not None:
                    undo.append(release)
        # The hold is taken before this second look: a withdrawal that changed the list after our
        # first look either sees the hold (and keeps the card back) or is seen here (and we refuse).
        now = self._state.snapshot
        if now.version != snapshot.version:
            try:
                for ids in containers:
                    resolve_units(now, ids)
            except AllocationRejected as exc:
                for release in undo:
                    release()
                log.warning("Allocate rejected: %s (withdrawn while allocating)", exc)
                context.abort(Code.INVALID_ARGUMENT, f"{exc} (withdrawn while allocating)")
        return answer.response

    def _answer(self, snapshot: Snapshot, request: bytes, context: CallContext) -> Answer:
        """The answer to a request this snapshot has not seen yet; a bad id aborts the call, and so
        does a request that is not an ``AllocateRequest`` (INTERNAL, as the transport says of any
        request it cannot parse)."""
        try:
            parsed = pb.AllocateRequest.FromString(request)
        except DecodeError as exc:
            context.abort(Code.INTERNAL, f"could not parse the request: {exc}")
        containers = tuple(tuple(container.devices_ids) for container in parsed.container_requests)
        responses = []
        try:
            for ids in containers:
                units = resolve_units(snapshot, ids)
                responses.append(edits_to_response(self._container_edits(snapshot, units)))
        except AllocationRejected as exc:
            log.warning("Allocate rejected: %s", exc)
            context.abort(Code.INVALID_ARGUMENT, str(exc))
        return Answer(
            containers, Encoded(pb.AllocateResponse(container_responses=responses).SerializeToString())
        )

    def _container_edits(self, snapshot: Snapshot, units: list[Unit]) -> ContainerEdits:
        """The backend's edits; one it cannot give (a bad option, a sharing daemon not up yet) is a
        refusal that says why, not an internal error."""
        try:
            return self._edits(snapshot.pool, units)
        except ValueError as exc:
            raise AllocationRejected(f"pool {snapshot.pool.name}: {exc}") from exc

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: CallContext
    ) -> pb.PreferredAllocationResponse:
        snapshot = self._state.snapshot
        answers = [
            pb.ContainerPreferredAllocationResponse(deviceIDs=self._prefer(snapshot, req))
            for req in request.container_requests
        ]
        return pb.PreferredAllocationResponse(container_responses=answers)

    @staticmethod
    def _prefer(snapshot: Snapshot, req: pb.ContainerPreferredAllocationRequest) -> list[str]:
        """The allocator's choice; on an allocator bug, kubelet's own order rather than a failed pod.

        A failed GetPreferredAllocation fails the pod's admission (KUBELET.md §3); a plain answer
        that honours must_include and size is always better than that. The allocator's search and
        the pool's topology are loaded and built once the pools stream (``Daemon.prepare_allocation``),
        not before; a call that comes first builds them (plugin/topology.py).
        """
        from hcs_deviceplugin.allocation.policy import ReplicaPolicy
        from hcs_deviceplugin.allocator import preferred_allocation

        available = list(req.available_deviceIDs)
        must = list(req.must_include_deviceIDs)
        size = req.allocation_size
        policy = ReplicaPolicy(snapshot.pool.replica_placement)
        try:
            units = snapshot.allocator_units()
            if snapshot.topology is not None:
                return snapshot.topology.get().preferred(available, must, size, units, policy)
            return preferred_allocation(available, must, size, units, policy=policy)
        except Exception:
            log.exception(
                "preferred allocation failed for pool %s; answering in kubelet's order", snapshot.pool.name
            )
            chosen = list(dict.fromkeys(must))[: max(size, 0)]
            chosen += [uid for uid in dict.fromkeys(available) if uid not in chosen][
                : max(size - len(chosen), 0)
            ]
            return chosen

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: CallContext
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()


def load_preferred_allocation() -> None:
    """Import the allocator's search, which a start leaves out: the pools stream without it, and
    the daemon calls this once they do, so that kubelet's first GetPreferredAllocation does not pay
    for the import (some milliseconds) on a pod's admission."""
    import hcs_deviceplugin.allocation.policy
    import hcs_deviceplugin.allocator  # noqa: F401
