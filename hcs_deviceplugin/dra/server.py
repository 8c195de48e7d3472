r"""The DRA kubelet plugin on its two sockets: registration and the DRA service.

Kubelet's plugin watcher finds ``<plugins_registry>/<driver>-reg.sock``, calls ``GetInfo`` there
(type ``DRAPlugin``, our driver name, the endpoint ``<plugins>/<driver>/dra.sock`` and the service
versions we serve) and reports its verdict through ``NotifyRegistrationStatus``. It then calls
NodePrepareResources / NodeUnprepareResources on the endpoint, in whichever of ``v1`` and
``v1beta1`` both sides know; the two versions are wire-identical, so one preparer answers both.
A per-claim failure is the claim's ``error`` (kubelet retries that claim), never a gRPC error.
With a :class:`~hcs_deviceplugin.dra.health.HealthFeed` the endpoint also serves kubelet's device
health stream, and ``supported_versions`` lists its service too: kubelet opens the stream only for
plugins that advertise it (and lists as services the ones it does not know, so older kubelets ignore
the extra entry).

Both sockets are :class:`~hcs_deviceplugin.rpc.server.RpcServer`\ s, like the pools', so a node
with a DRA pool never loads grpcio. Prepare and Unprepare are its ``blocking`` methods: they may
wait on a claim's API read, so they run on the server's worker threads (8, as grpcio's pool had),
not on the connection's reader, and a slow read does not hold up the calls behind it. The
preparer's one lock serialises all but the read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from hcs_deviceplugin.api.dra.v1 import api_wire as v1
from hcs_deviceplugin.api.pluginregistration.v1 import api_wire as reg
from hcs_deviceplugin.dra.health import HEALTH_SERVICES, HealthFeed, HealthServicer
from hcs_deviceplugin.dra.preparer import ClaimRef, PrepareResult
from hcs_deviceplugin.plugin.sockets import prepare_socket_path, remove_socket, socket_answers
from hcs_deviceplugin.rpc.calls import CallContext, Method, Unary
from hcs_deviceplugin.rpc.server import RpcServer

log = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"
SUPPORTED_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
"""What ``supported_versions`` lists: the gRPC services by version, as kubelet matches them."""
STOP_WAIT_SECONDS = 5.0
"""How long :meth:`DraPluginServer.stop` waits for a server's connections to close."""

REGISTRATION_SERVICE = "/pluginregistration.Registration/"
"""The plugin watcher's service; its proto package is ``pluginregistration`` (not ``…v1``)."""
DRA_V1_SERVICE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
DRA_V1BETA1_SERVICE = "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
"""The DRA services' full names: kubelet's protos carry the Go import path as their package, so the
``v1.DRAPlugin`` that ``supported_versions`` lists is this on the wire."""


class Preparer(Protocol):
    def prepare(self, claim: ClaimRef) -> PrepareResult: ...

    def unprepare(self, claim: ClaimRef) -> str: ...


def registration_socket(registry_dir: Path, driver: str) -> Path:
    return registry_dir / f"{driver}-reg.sock"


def dra_socket(plugins_dir: Path, driver: str) -> Path:
    return plugins_dir / driver / "dra.sock"


class RegistrationServicer:
    def __init__(
        self,
        driver: str,
        endpoint: Path,
        on_status: Callable[[bool, str], None],
        services: tuple[str, ...] = SUPPORTED_SERVICES,
    ) -> None:
        self._info = reg.PluginInfo(
            type=PLUGIN_TYPE, name=driver, endpoint=str(endpoint), supported_versions=list(services)
        )
        self._on_status = on_status

    def methods(self) -> dict[str, Method]:
        """``pluginregistration.Registration``, for the RPC server."""
        return {
            REGISTRATION_SERVICE + "GetInfo": Unary(reg.InfoRequest.FromString, self.GetInfo),
            REGISTRATION_SERVICE + "NotifyRegistrationStatus": Unary(
                reg.RegistrationStatus.FromString, self.NotifyRegistrationStatus
            ),
        }

    def GetInfo(self, request: reg.InfoRequest, context: CallContext) -> reg.PluginInfo:
        return self._info

    def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: CallContext
    ) -> reg.RegistrationStatusResponse:
        self._on_status(request.plugin_registered, request.error)
        return reg.RegistrationStatusResponse()


def _prepare_all(preparer: Preparer, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
    return {claim.uid: preparer.prepare(claim) for claim in claims}


class DraServicer:
    """``DRAPlugin`` for the preparer, in both versions kubelet may speak.

    ``v1beta1``'s messages are byte-identical to ``v1``'s and the transport carries bytes, so a
    ``v1beta1`` request parses as ``v1`` and the ``v1`` answer's bytes are the ``v1beta1`` answer:
    one set of handlers serves both paths.
    """

    def __init__(self, preparer: Preparer) -> None:
        self._preparer = preparer

    def methods(self, service: str) -> dict[str, Method]:
        """``service`` (:data:`DRA_V1_SERVICE` or :data:`DRA_V1BETA1_SERVICE`), for the RPC server."""
        return {
            service + "NodePrepareResources": Unary(
                v1.NodePrepareResourcesRequest.FromString, self.NodePrepareResources, blocking=True
            ),
            service + "NodeUnprepareResources": Unary(
                v1.NodeUnprepareResourcesRequest.FromString, self.NodeUnprepareResources, blocking=True
            ),
        }

    def NodePrepareResources(
        self, request: v1.NodePrepareResourcesRequest, context: CallContext
    ) -> v1.NodePrepareResourcesResponse:
        refs = [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]
        return v1.NodePrepareResourcesResponse(
            claims={
                uid: v1.NodePrepareResourceResponse(
                    devices=[
                        v1.Device(
                            request_names=d.requests,
                            pool_name=d.pool,
                            device_name=d.device,
                            cdi_device_ids=d.cdi_ids,
                        )
                        for d in result.devices
                    ],
                    error=result.error,
                )
                for uid, result in _prepare_all(self._preparer, refs).items()
            }
        )

    def NodeUnprepareResources(
        self, request: v1.NodeUnprepareResourcesRequest, context: CallContext
    ) -> v1.NodeUnprepareResourcesResponse:
        claims = {}
        for c in request.claims:
            claims[c.uid] = v1.NodeUnprepareResourceResponse(
                error=self._preparer.unprepare(ClaimRef(c.namespace, c.uid, c.name))
            )
        return v1.NodeUnprepareResourcesResponse(claims=claims)


class DraPluginServer:
    """Both sockets, started and stopped together. The DRA socket is up before the registration
    socket appears, so kubelet never dials an endpoint that is not there yet."""

    def __init__(
        self,
        driver: str,
        plugins_dir: Path,
        registry_dir: Path,
        preparer: Preparer,
        health: HealthFeed | None = None,
    ) -> None:
        self.driver = driver
        self.health = health
        self.endpoint = dra_socket(plugins_dir, driver)
        self.registration_path = registration_socket(registry_dir, driver)
        self._preparer = preparer
        self._servers: list[RpcServer] = []
        self._status_lock = threading.Condition()
        self.registered: bool | None = None
        self.registration_error = ""

    def start(self) -> None:
        self.endpoint.parent.mkdir(parents=True, exist_ok=True)
        self.registration_path.parent.mkdir(parents=True, exist_ok=True)
        if self.health is not None:
            self.health.open()
        self._serve(self.endpoint, self._dra_methods())
        services = SUPPORTED_SERVICES + (HEALTH_SERVICES if self.health is not None else ())
        servicer = RegistrationServicer(self.driver, self.endpoint, self._status, services)
        self._serve(self.registration_path, servicer.methods())
        log.info(
            "DRA driver %s: serving %s, registering at %s", self.driver, self.endpoint, self.registration_path
        )

    def _dra_methods(self) -> dict[str, Method]:
        """Both DRA versions, and the health stream in both versions when there is a feed."""
        dra = DraServicer(self._preparer)
        methods = dra.methods(DRA_V1_SERVICE) | dra.methods(DRA_V1BETA1_SERVICE)
        if self.health is not None:
            methods |= HealthServicer(self.health).methods()
        return methods

    def _serve(self, path: Path, methods: Mapping[str, Method]) -> None:
        prepare_socket_path(path)
        server = RpcServer(path, methods, name=f"dra-{path.stem}")
        server.start()
        self._servers.append(server)
        if not socket_answers(path, timeout=5.0):
            self.stop()
            raise RuntimeError(f"own socket {path} does not answer after start")

    def _status(self, registered: bool, error: str) -> None:
        if registered:
            log.info("DRA driver %s: registered with kubelet", self.driver)
        else:
            log.error("DRA driver %s: kubelet refused the registration: %s", self.driver, error)
        with self._status_lock:
            self.registered, self.registration_error = registered, error
            self._status_lock.notify_all()

    def wait_registered(self, timeout: float) -> bool:
        with self._status_lock:
            self._status_lock.wait_for(lambda: self.registered is not None, timeout)
            return bool(self.registered)

    def stop(self) -> None:
        """Registration socket first (kubelet stops routing to us), then the service; open health
        streams end first so the graceful stop does not wait on them."""
        if self.health is not None:
            self.health.close()
        for server in reversed(self._servers):
            server.stop().wait(STOP_WAIT_SECONDS)
            remove_socket(server.path)
        self._servers.clear()
