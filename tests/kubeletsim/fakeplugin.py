"""A scriptable device plugin on a real unix socket: the test double of the *plugin* side.

It records every request the simulator sends and lets a test push snapshots, end streams, fail calls
and re-bind its socket (what a real plugin does after a kubelet restart). Waits are on a condition.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

WAIT = 5.0


def device(dev_id: str, healthy: bool = True, numa: Sequence[int] = ()) -> dp.Device:
    """A v1beta1 Device with optional NUMA nodes."""
    topology = dp.TopologyInfo(nodes=[dp.NUMANode(ID=n) for n in numa]) if numa else None
    return dp.Device(ID=dev_id, health="Healthy" if healthy else "Unhealthy", topology=topology)


def devices(*ids: str) -> list[dp.Device]:
    return [device(i) for i in ids]


class FakePlugin(dp_grpc.DevicePluginServicer):
    """DevicePlugin servicer + its server; defaults answer like a cooperative plugin."""

    def __init__(
        self,
        plugin_dir: Path,
        socket_name: str = "fake.sock",
        options: dp.DevicePluginOptions | None = None,
        initial: Sequence[dp.Device] = (),
    ) -> None:
        self.socket_path = plugin_dir / socket_name
        self.options = options or dp.DevicePluginOptions()
        self.preferred_answer: list[str] | None = None
        self.allocate_error: tuple[grpc.StatusCode, str] | None = None
        self.preferred_error: tuple[grpc.StatusCode, str] | None = None
        self.options_error: tuple[grpc.StatusCode, str] | None = None
        self.options_gate: threading.Event | None = None
        self.options_calls = 0
        self.allocate_requests: list[dp.AllocateRequest] = []
        self.preferred_requests: list[dp.PreferredAllocationRequest] = []
        self.prestart_requests: list[dp.PreStartContainerRequest] = []
        self.streams_opened = 0
        self._devices = list(initial)
        self._streams: list[queue.Queue[list[dp.Device] | None]] = []
        self._changed = threading.Condition()
        self._server: grpc.Server | None = None
        self._executor: ThreadPoolExecutor | None = None

    # ---- lifecycle

    def serve(self) -> FakePlugin:
        """Bind the socket and serve (again after ``stop()``, like a plugin re-binding)."""
        self._executor = ThreadPoolExecutor(max_workers=8)
        server = grpc.server(self._executor)
        dp_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix:{self.socket_path}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait(WAIT)
            self._server = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def rebind(self) -> None:
        """New server on the same socket path, as a plugin does when its socket was wiped."""
        self.stop()
        self.serve()

    def register(
        self,
        kubelet_socket: Path,
        resource: str,
        version: str = "v1beta1",
        endpoint: str | None = None,
        request_options: dp.DevicePluginOptions | None = None,
    ) -> None:
        """Call Registration.Register; raises grpc.RpcError if kubelet refuses."""
        request = dp.RegisterRequest(
            version=version,
            endpoint=endpoint if endpoint is not None else self.socket_path.name,
            resource_name=resource,
            options=request_options or self.options,
        )
        with grpc.insecure_channel(f"unix:{kubelet_socket}") as channel:
            dp_grpc.RegistrationStub(channel).Register(request, timeout=WAIT)

    # ---- scripting

    def set_devices(self, devs: Sequence[dp.Device]) -> None:
        """Publish a new full snapshot on every open stream."""
        with self._changed:
            self._devices = list(devs)
            for stream in self._streams:
                stream.put(list(devs))

    def end_streams(self) -> None:
        """Return normally from every open ListAndWatch (kubelet sees EOF)."""
        with self._changed:
            for stream in self._streams:
                stream.put(None)

    @property
    def open_streams(self) -> int:
        with self._changed:
            return len(self._streams)

    def wait_open_streams(self, count: int) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._streams) == count, WAIT):
                raise TimeoutError(f"plugin has {len(self._streams)} open streams, wanted {count}")

    def wait_options_calls(self, count: int) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.options_calls >= count, WAIT):
                raise TimeoutError(
                    f"plugin got {self.options_calls} GetDevicePluginOptions calls, wanted {count}"
                )

    # ---- DevicePlugin service

    def GetDevicePluginOptions(
        self, request: dp.Empty, context: grpc.ServicerContext
    ) -> dp.DevicePluginOptions:
        with self._changed:
            self.options_calls += 1
            self._changed.notify_all()
        if self.options_gate is not None:  # a plugin that hangs in GetDevicePluginOptions
            self.options_gate.wait(WAIT)
        if self.options_error is not None:
            context.abort(*self.options_error)
        return self.options

    def ListAndWatch(
        self, request: dp.Empty, context: grpc.ServicerContext
    ) -> Iterator[dp.ListAndWatchResponse]:
        stream: queue.Queue[list[dp.Device] | None] = queue.Queue()
        context.add_callback(lambda: stream.put(None))
        with self._changed:
            self._streams.append(stream)
            self.streams_opened += 1
            first = list(self._devices)
            self._changed.notify_all()
        try:
            yield dp.ListAndWatchResponse(devices=first)
            while (snapshot := stream.get()) is not None:
                yield dp.ListAndWatchResponse(devices=snapshot)
        finally:
            with self._changed:
                self._streams.remove(stream)
                self._changed.notify_all()

    def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        self.preferred_requests.append(request)
        if self.preferred_error is not None:
            context.abort(*self.preferred_error)
        answers = []
        for container in request.container_requests:
            ids = self.preferred_answer
            if ids is None:
                ids = list(container.available_deviceIDs)[: container.allocation_size]
            answers.append(dp.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return dp.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        self.allocate_requests.append(request)
        if self.allocate_error is not None:
            context.abort(*self.allocate_error)
        return dp.AllocateResponse(
            container_responses=[
                dp.ContainerAllocateResponse(
                    envs={"FAKE_DEVICES": ",".join(c.devices_ids)},
                    devices=[
                        dp.DeviceSpec(container_path=f"/dev/{d}", host_path=f"/dev/{d}", permissions="rw")
                        for d in c.devices_ids
                    ],
                    cdi_devices=[dp.CDIDevice(name=f"fake.example.com/dev={d}") for d in c.devices_ids],
                )
                for c in request.container_requests
            ]
        )

    def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> dp.PreStartContainerResponse:
        self.prestart_requests.append(request)
        return dp.PreStartContainerResponse()
