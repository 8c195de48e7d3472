"""Device health for kubelet's DRA health stream (``DRAResourceHealth``, ``v1`` and ``v1alpha1``).

Kubelet (feature ResourceHealthStatus) opens ``NodeWatchResources`` on the driver's endpoint, in
``v1`` where it knows it (1.37 on) and ``v1alpha1`` before (recent kubelets only when the plugin
listed the service at registration), and shows each allocated device's health in the pod status.
Every message is the driver's complete list, so :class:`HealthFeed` keeps the current list and a
version: a stream sends the list when it opens and again after every change, never a delta. The
health is the one the ResourceSlice taints come from (the desired state's, card and partition
health folded in), so the scheduler and kubelet never disagree. Devices are named as the slice
names them: pool = the node, device = the DRA name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterable

from hcs_deviceplugin.api.drahealth.v1alpha1 import api_wire as pb
from hcs_deviceplugin.dra.devices import DraDevice
from hcs_deviceplugin.model import Health
from hcs_deviceplugin.rpc.calls import CallContext, Method, ServerStream

log = logging.getLogger(__name__)

HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")
"""The gRPC service names a plugin lists in ``supported_versions`` so kubelet opens the stream."""
WATCH_METHOD = "NodeWatchResources"
"""The stream's method; its path is ``/<service>/NodeWatchResources`` (the protos' package is the
version alone, as ``api_pb2_grpc.py`` spells it)."""

_STATUS = {Health.HEALTHY: pb.HEALTHY, Health.UNHEALTHY: pb.UNHEALTHY}


class HealthFeed:
    """The current health of this node's DRA devices, and a way to wait for the next change."""

    def __init__(self, pool: str, clock: Callable[[], float] = time.time) -> None:
        self.pool = pool
        self._clock = clock
        self._cond = threading.Condition()
        self._version = 0
        self._closed = False
        self._health: dict[str, Health] = {}
        self._since: dict[str, int] = {}

    def publish(self, devices: Iterable[DraDevice]) -> None:
        """Record the devices' health; a change (a device added, gone or flipped) wakes the streams.
        A device keeps the time it last changed, so an unchanged device reports when it became so."""
        health = {d.name: d.health for d in devices}
        with self._cond:
            if health == self._health:
                return
            now = int(self._clock())
            self._since = {
                name: self._since[name] if self._health.get(name) is value else now
                for name, value in health.items()
            }
            self._health = health
            self._version += 1
            self._cond.notify_all()

    def open(self) -> None:
        """Streams may run again (a server started after a stop)."""
        with self._cond:
            self._closed = False

    def close(self) -> None:
        """End every open stream (the server is stopping)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def snapshot(self) -> tuple[int, pb.NodeWatchResourcesResponse]:
        with self._cond:
            return self._version, self._response()

    def _response(self) -> pb.NodeWatchResourcesResponse:
        return pb.NodeWatchResourcesResponse(
            devices=[
                pb.DeviceHealth(
                    device=pb.DeviceIdentifier(pool_name=self.pool, device_name=name),
                    health=_STATUS.get(value, pb.UNKNOWN),
                    last_updated_time=self._since[name],
                )
                for name, value in sorted(self._health.items())
            ]
        )

    def wait_change(self, seen: int, timeout: float) -> tuple[int, pb.NodeWatchResourcesResponse] | None:
        """The next list after version ``seen``; None when closed or nothing changed in ``timeout``."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._version != seen, timeout)
            if self._closed or self._version == seen:
                return None
            return self._version, self._response()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed


def watch_path(service: str) -> str:
    """The gRPC method path of ``service``'s stream, e.g. ``/v1.DRAResourceHealth/NodeWatchResources``."""
    return f"/{service}/{WATCH_METHOD}"


class HealthServicer:
    """One stream per kubelet connection: the full list now, then after every change, until kubelet
    hangs up or the feed closes. The wait is bounded so a gone client is noticed within a second.

    Each open stream holds a server thread, so at most :attr:`MAX_STREAMS` run at once (both
    versions together; kubelet holds one): a newer stream ends the oldest, which kubelet would have
    replaced anyway, as a pool's ListAndWatch does.
    """

    POLL_SECONDS = 1.0
    MAX_STREAMS = 4

    def __init__(self, feed: HealthFeed) -> None:
        self._feed = feed
        self._lock = threading.Lock()
        self._streams: list[CallContext] = []

    @property
    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def methods(self) -> dict[str, Method]:
        """The stream of every version in :data:`HEALTH_SERVICES`, for the RPC server.

        ``v1`` is ``v1alpha1`` plus two optional response fields (a timeout, a message) that we leave
        unset, with the same field numbers: the transport carries bytes, so one handler answers both
        paths, and both versions share this servicer's limit on open streams.
        """
        return {
            watch_path(service): ServerStream(
                pb.NodeWatchResourcesRequest.FromString, self.NodeWatchResources
            )
            for service in HEALTH_SERVICES
        }

    def NodeWatchResources(
        self, request: pb.NodeWatchResourcesRequest, context: CallContext
    ) -> Generator[pb.NodeWatchResourcesResponse, None, None]:
        self._open(context)
        try:
            version, response = self._feed.snapshot()
            yield response
            while context.is_active() and not self._feed.closed:
                changed = self._feed.wait_change(version, self.POLL_SECONDS)
                if changed is not None:
                    version, response = changed
                    yield response
        finally:
            with self._lock:
                if context in self._streams:
                    self._streams.remove(context)

    def _open(self, context: CallContext) -> None:
        """Count the new stream in, ending the oldest beyond :attr:`MAX_STREAMS` (newest wins)."""
        with self._lock:
            self._streams.append(context)
            evicted = self._streams[: -self.MAX_STREAMS]
            del self._streams[: -self.MAX_STREAMS]
        for old in evicted:
            log.warning("more than %d DRA health streams; ending the oldest", self.MAX_STREAMS)
            old.cancel()
