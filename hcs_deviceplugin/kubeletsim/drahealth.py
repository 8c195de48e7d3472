"""Kubelet's side of the DRA device health stream in a test.

Kubelet (feature ResourceHealthStatus) opens ``DRAResourceHealth/NodeWatchResources`` on a registered
driver's endpoint only when the driver listed that service at registration (``v1`` preferred, as
1.37 does; ``v1alpha1``, all that 1.34-1.36 know), and keeps the latest complete list per driver.
:class:`HealthWatch` does the same on its own thread; a test waits on :meth:`HealthWatch.wait_for`,
a condition with a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from hcs_deviceplugin.api.drahealth.v1 import api_pb2 as pb_v1
from hcs_deviceplugin.api.drahealth.v1 import api_pb2_grpc as pb_v1_grpc
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2 as pb
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.kubeletsim.dra import DriverRegistration

HEALTH_V1 = "v1.DRAResourceHealth"
HEALTH_V1ALPHA1 = "v1alpha1.DRAResourceHealth"
HealthMap = dict[tuple[str, str], str]
"""(pool, device) → "HEALTHY" / "UNHEALTHY" / "UNKNOWN", as the last message said."""


class HealthWatch:
    def __init__(
        self, registration: DriverRegistration, known: tuple[str, ...] = (HEALTH_V1, HEALTH_V1ALPHA1)
    ) -> None:
        """``known``: the health services this kubelet speaks, preferred first."""
        self.service = next((s for s in known if s in registration.advertised), "")
        if not self.service:
            raise ValueError(f"driver {registration.name} advertises none of {known}")
        self._channel = grpc.insecure_channel(f"unix:{registration.endpoint}")
        self._cond = threading.Condition()
        self.messages: list[HealthMap] = []
        self.last_updated: dict[tuple[str, str], int] = {}
        self._stream: (
            grpc.CallIterator[pb_v1.NodeWatchResourcesResponse]
            | grpc.CallIterator[pb.NodeWatchResourcesResponse]
        )
        if self.service == HEALTH_V1:
            v1_stub = pb_v1_grpc.DRAResourceHealthStub(self._channel)
            self._stream = v1_stub.NodeWatchResources(pb_v1.NodeWatchResourcesRequest())
        else:
            alpha_stub = pb_grpc.DRAResourceHealthStub(self._channel)
            self._stream = alpha_stub.NodeWatchResources(pb.NodeWatchResourcesRequest())
        self._thread = threading.Thread(target=self._read, name="dra-health-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for raw in self._stream:
                # v1's fields 1-3 are v1alpha1's: either version's bytes read as v1alpha1.
                message = pb.NodeWatchResourcesResponse.FromString(raw.SerializeToString())
                seen: HealthMap = {}
                with self._cond:
                    for d in message.devices:
                        key = (d.device.pool_name, d.device.device_name)
                        seen[key] = pb.HealthStatus.Name(d.health)
                        self.last_updated[key] = d.last_updated_time
                    self.messages.append(seen)
                    self._cond.notify_all()
        except grpc.RpcError:
            pass  # kubelet logs it and reopens later; the test sees the stream end

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
