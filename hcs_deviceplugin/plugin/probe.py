"""Proving a pool is served, for readiness: a real call on its socket, and a current registration.

A connect alone would succeed while every server worker is pinned (a pool starved by streams), so
the probe makes the same cheap call kubelet makes first, GetDevicePluginOptions, with a short
deadline. A registration counts only if it was made to the kubelet.sock that exists now: after a
kubelet restart kubelet knows nothing of a pool until it registers again.
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as pb
from hcs_deviceplugin.kubelet.watch import FileIdentity
from hcs_deviceplugin.plugin.server import RegistrationStatus, ServerStatus
from hcs_deviceplugin.plugin.servicer import SERVICE
from hcs_deviceplugin.rpc.client import unary_call
from hcs_deviceplugin.rpc.status import RpcError


def probe_pool(socket_path: Path, timeout: float) -> str | None:
    """None if the socket answers GetDevicePluginOptions within ``timeout``, else why not."""
    if not socket_path.exists():
        return f"socket {socket_path.name} is missing"
    try:
        pb.DevicePluginOptions.FromString(
            unary_call(socket_path, SERVICE + "GetDevicePluginOptions", b"", timeout)
        )
    except RpcError as exc:
        return f"socket {socket_path.name} does not answer: {exc.code.name}"
    except ValueError as exc:  # the codec's DecodeError
        return f"socket {socket_path.name} answers something else: {exc}"
    return None


def registration_problem(status: ServerStatus) -> str | None:
    """None if ``status`` says registered, else its state and last error."""
    if status.status is RegistrationStatus.REGISTERED:
        return None
    reason = f"registration {status.status.value}"
    return f"{reason}: {status.last_error}" if status.last_error else reason


def pool_serving_problem(status: ServerStatus, current_kubelet: FileIdentity | None) -> str | None:
    """None if ``status`` says registered with the kubelet.sock whose identity is ``current_kubelet``."""
    problem = registration_problem(status)
    if problem is not None:
        return problem
    if current_kubelet is None:
        return "kubelet.sock is missing (kubelet not running?)"
    if status.registered_kubelet != current_kubelet:
        return "registered with a kubelet.sock that has since been replaced; registering again"
    return None
