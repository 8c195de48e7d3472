"""Kubelet's Registration service: validate a Register call, then hand it to whoever dials the plugin.

Validation is kept as pure functions with kubelet's exact error texts, because a plugin's retry logic
and its logs are written against those texts; the servicer only adapts them to gRPC (kubelet returns
plain Go errors, which reach the plugin as status UNKNOWN).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from hcs_deviceplugin.kubeletsim.records import RegisterRecord

SUPPORTED_VERSIONS = ("v1beta1",)

_NATIVE_NAMESPACE = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_SUBDOMAIN_MAX = 253
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_QUALIFIED_NAME_MAX = 63


class RegistrationError(Exception):
    """A Register call kubelet refuses; ``str()`` is the text the plugin receives."""


def _go_quote_list(values: tuple[str, ...]) -> str:
    """Render a Go string array the way ``%q`` does (``["v1beta1"]``), as kubelet's message does."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def version_error(version: str) -> str | None:
    """Kubelet's refusal text for an unsupported API version, or None when it is supported."""
    if version in SUPPORTED_VERSIONS:
        return None
    return (
        f'requested API version "{version}" is not supported by kubelet. '
        f"Supported version is {_go_quote_list(SUPPORTED_VERSIONS)}"
    )


def is_qualified_name(value: str) -> bool:
    """apimachinery's IsQualifiedName: optional DNS-1123 subdomain prefix, then a ≤63-char name."""
    parts = value.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > _DNS1123_SUBDOMAIN_MAX:
            return False
        if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    name = parts[-1]
    return 0 < len(name) <= _QUALIFIED_NAME_MAX and _QUALIFIED_NAME.fullmatch(name) is not None


def is_extended_resource_name(name: str) -> bool:
    """Kubelet's IsExtendedResourceName: namespaced, not native, and valid as a quota name."""
    if "/" not in name or _NATIVE_NAMESPACE in name or name.startswith(_REQUESTS_PREFIX):
        return False
    return is_qualified_name(_REQUESTS_PREFIX + name)


def request_error(request: dp.RegisterRequest) -> str | None:
    """The first check kubelet would fail the request on, in kubelet's order, or None."""
    error = version_error(request.version)
    if error is not None:
        return error
    if not is_extended_resource_name(request.resource_name):
        return f'the ResourceName "{request.resource_name}" is invalid'
    return None


def plugin_socket_path(plugin_dir: Path, endpoint: str) -> str:
    """Join the endpoint onto the plugin dir like Go's filepath.Join (an absolute endpoint stays inside)."""
    return os.path.normpath(f"{plugin_dir}/{endpoint}")


ConnectPlugin = Callable[[str, str], None]
"""``connect(resource_name, socket_path)``: dial, ask options, install; raises RegistrationError."""

RecordRegistration = Callable[[RegisterRecord], None]


class RegistrationServicer(dp_grpc.RegistrationServicer):
    """``v1beta1.Registration`` as served on kubelet.sock: validate, connect synchronously, answer.

    The connection (dial + GetDevicePluginOptions) happens inside the call, as in kubelet since 1.25,
    so a plugin that only starts serving after Register returns fails here like it would on a node.
    """

    def __init__(self, plugin_dir: Path, connect: ConnectPlugin, record: RecordRegistration) -> None:
        self._plugin_dir = plugin_dir
        self._connect = connect
        self._record = record

    def Register(self, request: dp.RegisterRequest, context: grpc.ServicerContext) -> dp.Empty:
        received = time.monotonic()
        error = request_error(request)
        if error is None:
            try:
                self._connect(request.resource_name, plugin_socket_path(self._plugin_dir, request.endpoint))
            except RegistrationError as exc:
                error = str(exc)
        self._record(
            RegisterRecord(
                version=request.version,
                endpoint=request.endpoint,
                resource_name=request.resource_name,
                pre_start_required=request.options.pre_start_required,
                get_preferred_allocation_available=request.options.get_preferred_allocation_available,
                time=received,
                accepted=error is None,
                error=error or "",
            )
        )
        if error is not None:
            context.abort(grpc.StatusCode.UNKNOWN, error)
        return dp.Empty()
