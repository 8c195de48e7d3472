"""Kubelet's side of one plugin connection: dial, options, the ListAndWatch stream and the unary calls.

One ``PluginClient`` is one registration (kubelet's devicemanager ``client`` + ``endpoint``). It owns
no kubelet state; it reports what it receives through callbacks and the simulator decides whether the
client is still the one that counts. Every blocking wait here can be cut short by ``close()`` so that
a simulated kubelet restart never hangs on a plugin that stopped answering.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from hcs_deviceplugin.kubeletsim.registration import RegistrationError

log = logging.getLogger(__name__)

MAX_RECEIVE_BYTES = 4 * 1024 * 1024
"""gRPC's default receive limit, which kubelet never raises (kubernetes/kubernetes#109304)."""

PRE_START_TIMEOUT = 30.0
"""KubeletPreStartContainerRPCTimeoutInSecs; the only device-plugin RPC kubelet puts a deadline on."""

OnOpen = Callable[["PluginClient"], None]
OnMessage = Callable[["PluginClient", list[dp.Device], float], None]
OnEnd = Callable[["PluginClient", grpc.RpcError | None], None]


def describe_rpc_error(exc: grpc.RpcError) -> tuple[grpc.StatusCode | None, str]:
    """Status code and details of a failed call (grpc raises objects that are also ``grpc.Call``)."""
    if isinstance(exc, grpc.Call):
        return exc.code(), exc.details() or ""
    return None, str(exc)


def rpc_error_text(code: grpc.StatusCode | None, details: str) -> str:
    """A failed call rendered like a Go gRPC error, which is how kubelet's messages embed them."""
    name = code.name if code is not None else "UNKNOWN"
    return f"rpc error: code = {name} desc = {details}"


class PluginClient:
    """A connection to one plugin socket for one resource, as kubelet opens on each Register."""

    def __init__(self, resource: str, socket_path: str) -> None:
        self.resource = resource
        self.socket_path = socket_path
        self._channel = grpc.insecure_channel(
            f"unix:{socket_path}",
            options=[
                ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
                ("grpc.default_authority", "localhost"),
            ],
        )
        self._stub = dp_grpc.DevicePluginStub(self._channel)
        self._lock = threading.Lock()
        self._closed = False
        self._stream: grpc.CallIterator[dp.ListAndWatchResponse] | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"PluginClient({self.resource!r}, {self.socket_path!r})"

    def connect(self, dial_timeout: float) -> dp.DevicePluginOptions:
        """Blocking dial then GetDevicePluginOptions, with kubelet's error texts on failure.

        The dial is the options call itself made wait-for-ready under the dial deadline: the plugin
        sees the same wire traffic as from kubelet (connect, then GetDevicePluginOptions), and no
        connectivity-polling thread is left behind to delay ``close()`` (grpc.channel_ready_future
        does that). The one difference: a plugin that connects but never answers the options call
        fails after ``dial_timeout`` here, where kubelet would wait forever.
        """
        try:
            return self._stub.GetDevicePluginOptions(dp.Empty(), timeout=dial_timeout, wait_for_ready=True)
        except grpc.RpcError as exc:
            code, details = describe_rpc_error(exc)
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise RegistrationError("failed to dial device plugin: context deadline exceeded") from exc
            if self._closed:
                raise RegistrationError("failed to dial device plugin: context canceled") from exc
            raise RegistrationError(
                f"failed to get device plugin options: {rpc_error_text(code, details)}"
            ) from exc

    def start_stream(self, on_open: OnOpen, on_message: OnMessage, on_end: OnEnd) -> None:
        """Open ListAndWatch in a daemon thread; ``on_end`` runs exactly once when it stops."""
        thread = threading.Thread(
            target=self._run_stream,
            args=(on_open, on_message, on_end),
            name=f"kubeletsim-listandwatch-{self.resource}",
            daemon=True,
        )
        self._thread = thread
        thread.start()

    def _run_stream(self, on_open: OnOpen, on_message: OnMessage, on_end: OnEnd) -> None:
        error: grpc.RpcError | None = None
        try:
            with self._lock:
                if self._closed:
                    raise _ClosedError("client closed before ListAndWatch was opened")
                stream = self._stub.ListAndWatch(dp.Empty())
                self._stream = stream
            on_open(self)
            for response in stream:
                on_message(self, list(response.devices), time.monotonic())
        except grpc.RpcError as exc:
            error = exc
        except Exception:
            log.exception("ListAndWatch consumer for %s failed", self.resource)
            error = _ClosedError("ListAndWatch consumer failed")
        on_end(self, error)

    def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> dp.PreferredAllocationResponse:
        """One-container GetPreferredAllocation, no deadline (as kubelet)."""
        request = dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must_include),
                    allocation_size=size,
                )
            ]
        )
        return self._stub.GetPreferredAllocation(request)

    def allocate(self, device_ids: Sequence[str]) -> dp.AllocateResponse:
        """Allocate with exactly one ContainerAllocateRequest, no deadline (as kubelet)."""
        request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=device_ids)])
        return self._stub.Allocate(request)

    def pre_start_container(self, device_ids: Sequence[str]) -> None:
        """PreStartContainer with kubelet's 30 s deadline."""
        self._stub.PreStartContainer(
            dp.PreStartContainerRequest(devices_ids=device_ids), timeout=PRE_START_TIMEOUT
        )

    def close(self) -> None:
        """Cancel the stream and any pending dial, close the channel; safe to call repeatedly."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stream = self._stream
        if stream is not None:
            stream.cancel()  # type: ignore[no-untyped-call]
        self._channel.close()

    def join(self, timeout: float) -> None:
        """Wait (bounded) for the stream thread to finish after ``close()``."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


class _ClosedError(grpc.RpcError):
    """A stream end not reported by gRPC itself (closed early, consumer bug); handled like any other."""
