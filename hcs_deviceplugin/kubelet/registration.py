"""Registering a plugin with kubelet's ``v1beta1.Registration`` service on ``kubelet.sock``.

Kubelet dials the plugin back inside the Register call with a 10 s blocking dial and then calls
GetDevicePluginOptions, so the plugin must already be serving and our deadline must exceed 10 s
(KUBELET.md §2). A kubelet that hangs inside Register must not hold up a daemon shutdown, so the
call can be cancelled from another thread through :class:`RegisterCall`.
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as pb
from hcs_deviceplugin.rpc.client import CallHandle, unary_call
from hcs_deviceplugin.rpc.status import RpcError

API_VERSION = "v1beta1"
REGISTER_METHOD = "/v1beta1.Registration/Register"
REGISTER_DEADLINE_S = 20.0


class RegistrationError(RuntimeError):
    """Kubelet refused the registration or could not be reached."""


class KubeletSocketMissing(RegistrationError):
    """kubelet.sock does not exist: kubelet is not running, so there is nothing to retry until it is."""


def plugin_options() -> pb.DevicePluginOptions:
    """The options every pool plugin advertises, in Register and in GetDevicePluginOptions alike."""
    return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)


class RegisterCall(CallHandle):
    """A handle on the Register call in flight, so another thread can cancel it at once.

    ``target`` is the identity of the kubelet.sock the call went to, so a caller that learns of a
    newer kubelet can tell a call to the old one (worth cancelling) from one to the new one.
    """

    def __init__(self, target: tuple[int, int, int] | None = None) -> None:
        super().__init__()
        self.target = target


def register(
    kubelet_socket: Path,
    endpoint: str,
    resource_name: str,
    deadline: float = REGISTER_DEADLINE_S,
    call: RegisterCall | None = None,
) -> None:
    """Call Register once; raise :class:`RegistrationError` with kubelet's reason on failure.

    Each call dials kubelet.sock afresh, so a socket a restarted kubelet re-created is never reached
    over a connection to the process it replaced.
    """
    if not kubelet_socket.exists():
        raise KubeletSocketMissing(f"{kubelet_socket} does not exist (kubelet not running?)")
    request = pb.RegisterRequest(
        version=API_VERSION, endpoint=endpoint, resource_name=resource_name, options=plugin_options()
    )
    try:
        unary_call(kubelet_socket, REGISTER_METHOD, request.SerializeToString(), deadline, call)
    except RpcError as exc:
        if call is not None and call.cancelled:
            raise RegistrationError(f"Register({resource_name}) cancelled") from exc
        raise RegistrationError(f"Register({resource_name}) failed: {exc.code.name}: {exc.details}") from exc
