"""Kubelet's DRA side in a test: the plugin watcher's registration dial-back, then Prepare/Unprepare.

As kubelet does, :class:`DraKubeletSimulator` watches ``plugins_registry`` for sockets; for each new
one it dials the plugin, calls ``GetInfo``, checks the answer (type ``DRAPlugin``, a driver name, an
endpoint that answers, a service version it speaks, ``v1`` preferred over ``v1beta1``) and reports
its verdict with ``NotifyRegistrationStatus``. Registered drivers can then be called with claims, as
kubelet calls them when it starts or removes a pod's containers.

The watch polls the directory (every ``poll_seconds``): a test waits on :meth:`wait_registered`, a
condition with a deadline, never on the poll itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from hcs_deviceplugin.api.dra.v1 import api_pb2 as v1
from hcs_deviceplugin.api.dra.v1 import api_pb2_grpc as v1_grpc
from hcs_deviceplugin.api.dra.v1beta1 import api_pb2 as v1beta1
from hcs_deviceplugin.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from hcs_deviceplugin.api.pluginregistration.v1 import api_pb2 as reg
from hcs_deviceplugin.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from hcs_deviceplugin.plugin.sockets import is_socket, socket_answers

log = logging.getLogger(__name__)

KNOWN_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
"""Kubelet's preference order, 1.34 and later (``servicesSupportedByKubelet``)."""
KNOWN_SERVICES_1_32 = ("v1beta1.DRAPlugin",)
"""What a 1.32 / 1.33 kubelet picks from ``supported_versions`` (besides the removed v1alpha4)."""
CALL_TIMEOUT = 10.0


@dataclass(frozen=True)
class DriverRegistration:
    name: str
    endpoint: str
    service: str
    socket: str
    advertised: tuple[str, ...] = ()
    """Everything ``supported_versions`` listed (kubelet opens the health stream only if listed)."""


def choose_service(listed: Sequence[str], known: Sequence[str] = KNOWN_SERVICES) -> str:
    """The first of ``known`` (kubelet's own list, newest first) that the plugin lists, or ""."""
    return next((service for service in known if service in listed), "")


def check_info(info: reg.PluginInfo, known: Sequence[str] = KNOWN_SERVICES) -> tuple[str, str]:
    """(service chosen, "") or ("", why kubelet refuses), as the DRA registration handler checks;
    entries kubelet does not know (optional services such as the health stream) are ignored."""
    if info.type != "DRAPlugin":
        return "", f"plugin type {info.type!r} is not DRAPlugin"
    if not info.name:
        return "", "DRA plugin name is empty"
    service = choose_service(info.supported_versions, known)
    if not service:
        return "", f"none of the versions {list(info.supported_versions)} is supported by kubelet"
    if not info.endpoint or not socket_answers(Path(info.endpoint)):
        return "", f"endpoint {info.endpoint!r} does not answer"
    return service, ""


class DraKubeletSimulator:
    def __init__(
        self, registry_dir: Path, poll_seconds: float = 0.02, known_services: Sequence[str] = KNOWN_SERVICES
    ) -> None:
        self.registry_dir = registry_dir
        self.known_services = tuple(known_services)
        self._poll = poll_seconds
        self._cond = threading.Condition()
        self._seen: set[str] = set()
        self.drivers: dict[str, DriverRegistration] = {}
        self.refused: dict[str, str] = {}
        """socket path → why registration was refused."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dra-kubeletsim", daemon=True)

    def start(self) -> DraKubeletSimulator:
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def __enter__(self) -> DraKubeletSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_registered(self, driver: str, timeout: float) -> DriverRegistration:
        with self._cond:
            if not self._cond.wait_for(lambda: driver in self.drivers, timeout):
                raise TimeoutError(
                    f"driver {driver} not registered within {timeout}s (refused: {self.refused})"
                )
            return self.drivers[driver]

    def forget(self, driver: str) -> None:
        """As kubelet does when the socket goes: the next socket at that path registers again."""
        with self._cond:
            gone = self.drivers.pop(driver, None)
            if gone is not None:
                self._seen.discard(gone.socket)

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                present = {str(p) for p in self.registry_dir.iterdir() if is_socket(p)}
            except OSError:
                continue
            with self._cond:
                for driver, record in list(self.drivers.items()):
                    if record.socket not in present:
                        del self.drivers[driver]
                self._seen &= present
                new = sorted(present - self._seen)
                self._seen |= set(new)
            for path in new:
                self._register(path)

    def _register(self, path: str) -> None:
        try:
            with grpc.insecure_channel(f"unix:{path}") as channel:
                stub = reg_grpc.RegistrationStub(channel)
                info = stub.GetInfo(reg.InfoRequest(), timeout=CALL_TIMEOUT)
                service, problem = check_info(info, self.known_services)
                stub.NotifyRegistrationStatus(
                    reg.RegistrationStatus(plugin_registered=not problem, error=problem), timeout=CALL_TIMEOUT
                )
        except grpc.RpcError as exc:
            problem = f"registration call failed: {exc.code()}"
            service = ""
        with self._cond:
            if problem:
                self.refused[path] = problem
            else:
                self.drivers[info.name] = DriverRegistration(
                    info.name, info.endpoint, service, path, tuple(info.supported_versions)
                )
            self._cond.notify_all()

    # -- what kubelet does for a pod's claims --------------------------------------------------

    def prepare(
        self, driver: str, claims: Sequence[tuple[str, str, str]], service: str | None = None
    ) -> v1.NodePrepareResourcesResponse:
        """NodePrepareResources for (namespace, uid, name) claims, in the registered (or given) version."""
        record = self.drivers[driver]
        request = v1.NodePrepareResourcesRequest(
            claims=[v1.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]
        )
        with grpc.insecure_channel(f"unix:{record.endpoint}") as channel:
            if (service or record.service) == "v1beta1.DRAPlugin":
                old = v1beta1_grpc.DRAPluginStub(channel).NodePrepareResources(
                    v1beta1.NodePrepareResourcesRequest.FromString(request.SerializeToString()),
                    timeout=CALL_TIMEOUT,
                )
                return v1.NodePrepareResourcesResponse.FromString(old.SerializeToString())
            return v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=CALL_TIMEOUT)

    def unprepare(
        self, driver: str, claims: Sequence[tuple[str, str, str]]
    ) -> v1.NodeUnprepareResourcesResponse:
        record = self.drivers[driver]
        request = v1.NodeUnprepareResourcesRequest(
            claims=[v1.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]
        )
        with grpc.insecure_channel(f"unix:{record.endpoint}") as channel:
            if record.service == "v1beta1.DRAPlugin":
                old = v1beta1_grpc.DRAPluginStub(channel).NodeUnprepareResources(
                    v1beta1.NodeUnprepareResourcesRequest.FromString(request.SerializeToString()),
                    timeout=CALL_TIMEOUT,
                )
                return v1.NodeUnprepareResourcesResponse.FromString(old.SerializeToString())
            return v1_grpc.DRAPluginStub(channel).NodeUnprepareResources(request, timeout=CALL_TIMEOUT)
