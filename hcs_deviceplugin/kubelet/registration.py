"""Registering a plugin with kubelet's ``v1beta1.Registration`` service on ``kubelet.sock``.

Kubelet dials the plugin back inside the Register call with a 10 s blocking dial and then calls
GetDevicePluginOptions, so the plugin must already be serving and our deadline must exceed 10 s
(KUBELET.md §2). A kubelet that hangs inside Register must not hold up a daemon shutdown, so the
call can be cancelled from another thread through :class:`RegisterCall`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc

API_VERSION = "v1beta1"
REGISTER_DEADLINE_S = 20.0
FRESH_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
"""gRPC shares connections between channels to the same target; a socket path re-created by a
restarted kubelet must be dialled anew, not reached over a connection to the process it replaced."""


class RegistrationError(RuntimeError):
    """Kubelet refused the registration or could not be reached."""


class KubeletSocketMissing(RegistrationError):
    """kubelet.sock does not exist: kubelet is not running, so there is nothing to retry until it is."""


def plugin_options() -> pb.DevicePluginOptions:
    """The options every pool plugin advertises, in Register and in GetDevicePluginOptions alike."""
    return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)


class RegisterCall:
    """A handle on the Register call in flight, so another thread can cancel it at once.

    ``target`` is the identity of the kubelet.sock the call went to, so a caller that learns of a
    newer kubelet can tell a call to the old one (worth cancelling) from one to the new one.
    """

    def __init__(self, target: tuple[int, int, int] | None = None) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._future: Any = None
        self._cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            future = self._future
        if future is not None:
            future.cancel()

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def _track(self, future: Any) -> bool:
        """Remember the call; False (and the call cancelled) if cancel() came first."""
        with self._lock:
            self._future = future
            cancelled = self._cancelled
        if cancelled:
            future.cancel()
        return not cancelled


def register(
    kubelet_socket: Path,
    endpoint: str,
    resource_name: str,
    deadline: float = REGISTER_DEADLINE_S,
    call: RegisterCall | None = None,
) -> None:
    """Call Register once; raise :class:`RegistrationError` with kubelet's reason on failure."""
    if not kubelet_socket.exists():
        raise KubeletSocketMissing(f"{kubelet_socket} does not exist (kubelet not running?)")
    request = pb.RegisterRequest(
        version=API_VERSION, endpoint=endpoint, resource_name=resource_name, options=plugin_options()
    )
    with grpc.insecure_channel(f"unix:{kubelet_socket}", options=FRESH_CONNECTION) as channel:
        future = pb_grpc.RegistrationStub(channel).Register.future(
            request, timeout=deadline, wait_for_ready=False
        )
        if call is not None and not call._track(future):
            raise RegistrationError(f"Register({resource_name}) cancelled")
        try:
            future.result()
        except grpc.FutureCancelledError as exc:
            raise RegistrationError(f"Register({resource_name}) cancelled") from exc
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            raise RegistrationError(f"Register({resource_name}) failed: {code}: {details}") from exc
