"""Kubelet's side of the DRA device health stream in a test.

Kubelet (feature ResourceHealthStatus) opens ``v1alpha1.DRAResourceHealth/NodeWatchResources`` on a
registered driver's endpoint only when the driver listed that service at registration, and keeps the
latest complete list per driver. :class:`HealthWatch` does the same on its own thread; a test waits
on :meth:`HealthWatch.wait_for`, a condition with a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2 as pb
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.kubeletsim.dra import DriverRegistration

HEALTH_SERVICE = "v1alpha1.DRAResourceHealth"
HealthMap = dict[tuple[str, str], str]
"""(pool, device) → "HEALTHY" / "UNHEALTHY" / "UNKNOWN", as the last message said."""


class HealthWatch:
    def __init__(self, registration: DriverRegistration) -> None:
        if HEALTH_SERVICE not in registration.advertised:
            raise ValueError(f"driver {registration.name} does not advertise {HEALTH_SERVICE}")
        self._channel = grpc.insecure_channel(f"unix:{registration.endpoint}")
        self._cond = threading.Condition()
        self.messages: list[HealthMap] = []
        self.error: grpc.StatusCode | None = None
        self.last_updated: dict[tuple[str, str], int] = {}
        self._stream = pb_grpc.DRAResourceHealthStub(self._channel).NodeWatchResources(
            pb.NodeWatchResourcesRequest()
        )
        self._thread = threading.Thread(target=self._read, name="dra-health-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for message in self._stream:
                seen: HealthMap = {}
                with self._cond:
                    for d in message.devices:
                        key = (d.device.pool_name, d.device.device_name)
                        seen[key] = pb.HealthStatus.Name(d.health)
                        self.last_updated[key] = d.last_updated_time
                    self.messages.append(seen)
                    self._cond.notify_all()
        except grpc.RpcError as exc:
            with self._cond:
                self.error = exc.code()
                self._cond.notify_all()

    def wait_for(self, predicate: Callable[[HealthMap], bool], timeout: float) -> HealthMap:
        """The first list (the latest kept) for which ``predicate`` holds; TimeoutError if none."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self.messages) and predicate(self.messages[-1]), timeout):
                raise TimeoutError(f"health never matched within {timeout}s: last {self.messages[-1:]}")
            return self.messages[-1]

    def wait_ended(self, timeout: float) -> bool:
        """Whether the stream ended (the plugin closed it or went) within ``timeout``."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        self._stream.cancel()  # type: ignore[no-untyped-call]
        self._thread.join(5.0)
        self._channel.close()

    def __enter__(self) -> HealthWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
