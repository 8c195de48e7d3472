"""The daemon's HTTP side: ``/metrics``, ``/healthz``, ``/readyz`` and ``/report`` on one port.

Served by waitress, a production WSGI server in pure Python: connections are read and written by
one event loop, and only complete requests reach a small fixed pool of worker threads, so idle or
slow clients hold no thread and cannot starve the probes. Idle connections are closed after
``IDLE_TIMEOUT`` seconds, open connections are capped, and request headers and bodies are bounded
(nothing here takes a body). ``/metrics`` is the text format 0.0.4 of :mod:`.exposition`, which
Prometheus accepts whatever it asks for first, gzipped when the client accepts gzip, and filtered by
``?name[]=`` when asked. Every endpoint answers GET and HEAD; anything else is 405.

``/report`` names every pod and container holding a device, so by default it answers only clients
on the loopback address (``kubectl exec``, ``kubectl port-forward``, the node itself) while
``/metrics`` and the probes stay reachable on the pod address; ``report_access="any"`` opens it to
everyone who can reach the port, ``"off"`` removes it.

What only an answer needs (the probes, the report) is imported by the server thread as it builds
the server, like waitress: ``run`` binds the port before its pools register, and answers nothing
before they stream (or :data:`DEFER_LIMIT` passed).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from hcs_deviceplugin.daemon import Daemon
from hcs_deviceplugin.model import LinkMatrix
from hcs_deviceplugin.observability.exposition import (
    CONTENT_TYPE,
    accepts_gzip,
    gzip_compress,
    requested_names,
)
from hcs_deviceplugin.observability.metrics import Metrics

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment
    from waitress.server import BaseWSGIServer, MultiSocketServer

    from hcs_deviceplugin.observability.probes import LivenessProbe

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
TEXT = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"

THREADS = 4
"""Worker threads for complete requests. Each answer is one view read (microseconds) except a probe
whose daemon or pool sockets are stuck (bounded by the probe timeouts: 2 s for liveness, 1 s per
pool for readiness); four keep scrapes and the other probe answered while two such probes wait."""
IDLE_TIMEOUT = 30
"""Seconds a connection may sit idle between requests before it is closed (Prometheus reconnects)."""
CLEANUP_INTERVAL = 5
"""How often, in seconds, idle connections are looked for."""
CONNECTION_LIMIT = 64
"""Open connections at most; past it new ones wait in the listen backlog until idle ones close."""
MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024
LOOP_TIMEOUT = 1.0
"""Seconds one event-loop wait may last; stop() also wakes it at once."""
DEFER_LIMIT = 0.5
"""Seconds at most that ``run`` keeps the server unbuilt (``start(defer=DEFER_LIMIT)``) while its
pools do not stream to kubelet: a probe that connects meanwhile waits in the listen backlog, well inside
kubelet's default 1-second probe timeout, even when the start is long (another instance's lock)."""

ReportAccess = Literal["local", "any", "off"]
REPORT_ACCESS: tuple[ReportAccess, ...] = ("local", "any", "off")
PATHS = ("/metrics", "/healthz", "/readyz", "/report")

LinksFunction = Callable[[], LinkMatrix]
Response = tuple[int, list[tuple[str, str]], bytes]

STATUS_TEXT = {
    200: "OK",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def is_loopback(address: str) -> bool:
    """Whether a peer address is the host itself (IPv4 127/8, ``::1``, or IPv4-mapped loopback)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def report_allowed(access: ReportAccess, remote_address: str) -> bool:
    """Whether ``/report`` answers a client at ``remote_address`` under ``access``."""
    if access == "any":
        return True
    return access == "local" and is_loopback(remote_address)


class ObservabilityServer:
    """Serves the four endpoints for one daemon; ``port=0`` picks a free port (read ``.port``).

    ``links`` supplies the card-to-card link matrix for ``/report`` (the daemon view has none); the
    report lists no links without it. ``metrics`` is bound to the daemon's view here unless it
    already is, so one call wires everything. ``report_access`` says who may read ``/report``
    (module docstring); ``idle_timeout`` is the idle-connection limit in seconds.
    ``liveness_timeout`` None is the probes' own default (``probes.DEFAULT_TIMEOUT``).
    """

    def __init__(
        self,
        daemon: Daemon,
        metrics: Metrics,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        links: LinksFunction | None = None,
        liveness_timeout: float | None = None,
        report_access: ReportAccess = "local",
        idle_timeout: int = IDLE_TIMEOUT,
        threads: int = THREADS,
    ) -> None:
        if report_access not in REPORT_ACCESS:
            raise ValueError(
                f"report_access must be one of {', '.join(REPORT_ACCESS)}, not {report_access!r}"
            )
        self.daemon = daemon
        self.metrics = metrics
        self.host = host
        self.report_access: ReportAccess = report_access
        self._requested_port = port
        self._links = links
        self._liveness_timeout = liveness_timeout
        self._liveness_probe: LivenessProbe | None = None
        self._liveness_lock = threading.Lock()
        self._idle_timeout = idle_timeout
        self._threads = threads
        self._server: BaseWSGIServer | MultiSocketServer | None = None
        self._port = port
        self._stopping = threading.Event()
        self._go = threading.Event()
        self._server_lock = threading.Lock()
        self._building = False
        self._socket_map: dict[int, Any] = {}
        self._thread: threading.Thread | None = None
        self._defer = 0.0
        self._ready: Callable[[float], object] | None = None
        if not metrics.bound:
            metrics.bind(daemon.view)

    @property
    def port(self) -> int:
        """The bound port (the requested one until :meth:`start`)."""
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, defer: float = 0.0, ready: Callable[[float], object] | None = None) -> None:
        """Bind now (OSError if the port is taken) and serve on a background thread.

        Building the server loads waitress (some 8 ms of imports and address lookups). With
        ``defer`` (seconds) the server thread does that once :meth:`serve_now` is called and then
        ``ready(seconds left)`` has returned, or ``defer`` has passed, so that ``run`` registers its
        pools first; the port is bound all along, so a probe that comes early is answered late,
        never refused.
        """
        if self._thread is not None:
            return
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.create_server(
            (self.host, self._requested_port),
            family=family,
            backlog=64,
            dualstack_ipv6=self.host == "::" and socket.has_dualstack_ipv6(),
        )
        self._port = int(listener.getsockname()[1])
        # Fresh per start: a thread left building by an earlier stop() keeps its own.
        self._stopping, self._go, self._socket_map = threading.Event(), threading.Event(), {}
        self._defer = defer
        self._ready = ready
        if defer <= 0:
            self._go.set()
            try:
                self._server = self._build(listener)
            except BaseException:
                listener.close()
                raise
        self._thread = threading.Thread(
            target=self._serve,
            args=(listener, self._stopping, self._go, self._socket_map),
            name="observability-http",
            daemon=True,
        )
        self._thread.start()
        log.info(
            "observability endpoints on %s (/metrics /healthz /readyz; /report: %s)",
            self.url,
            self.report_access,
            extra={"address": self.host, "port": self.port, "report_access": self.report_access},
        )

    def serve_now(self) -> None:
        """End a deferred start's wait: the server thread builds the server and answers from now on."""
        self._go.set()

    def stop(self) -> None:
        """Stop accepting, close every connection, end the worker threads; idempotent.

        A deferred server that its thread is building right now (``run`` stopped just after its
        pools began streaming) is not waited for: the thread closes it as soon as it is built, and
        a SIGTERM is not held up by waitress's imports.
        """
        thread = self._thread
        self._thread = None
        if thread is None:
            return
        self._stopping.set()
        self._go.set()
        with self._server_lock:  # the server thread closes the trigger only once it cleared _server
            server, building = self._server, self._building
            if building:
                return
            if server is not None:
                from waitress.server import BaseWSGIServer  # loaded: ``server`` is one

                if isinstance(server, BaseWSGIServer):
                    server.pull_trigger()  # wake the event loop now rather than at its next timeout
        thread.join(timeout=5)

    def _liveness(self) -> LivenessProbe:
        """The one liveness probe (it remembers a helper still blocked), made on first use."""
        with self._liveness_lock:
            if self._liveness_probe is None:
                from hcs_deviceplugin.observability.probes import DEFAULT_TIMEOUT, LivenessProbe

                timeout = DEFAULT_TIMEOUT if self._liveness_timeout is None else self._liveness_timeout
                self._liveness_probe = LivenessProbe(self.daemon, timeout)
            return self._liveness_probe

    def _build(
        self, listener: socket.socket, socket_map: dict[int, Any] | None = None
    ) -> BaseWSGIServer | MultiSocketServer:
        from waitress.server import create_server  # here: ``run`` registers its pools before this

        from hcs_deviceplugin.observability import report  # noqa: F401  # before the first /report

        self._liveness()  # and the probes, before the first probe

        return create_server(
            self.wsgi,
            map=self._socket_map if socket_map is None else socket_map,
            sockets=[listener],
            threads=self._threads,
            channel_timeout=self._idle_timeout,
            cleanup_interval=min(CLEANUP_INTERVAL, self._idle_timeout),
            connection_limit=CONNECTION_LIMIT,
            max_request_header_size=MAX_HEADER_BYTES,
            max_request_body_size=MAX_BODY_BYTES,
            ident="hcs-deviceplugin",
            asyncore_use_poll=True,
        )

    def _serve(
        self,
        listener: socket.socket,
        stopping: threading.Event,
        go: threading.Event,
        socket_map: dict[int, Any],
    ) -> None:
        """The server thread: build the server if :meth:`start` deferred it, then run its event
        loop; everything it owns is closed on this thread too."""
        deadline = time.monotonic() + self._defer
        go.wait(self._defer)
        if self._ready is not None and not stopping.is_set():
            try:
                self._ready(max(0.0, deadline - time.monotonic()))
            except Exception:  # the probes matter more than the wait: serve anyway
                log.exception("waiting to build the observability HTTP server failed")
        with self._server_lock:
            server = self._server
            stopped = server is None and stopping.is_set()
            self._building = server is None and not stopped
        if stopped:
            listener.close()
            return
        if server is None:
            try:
                server = self._build(listener, socket_map)
            except Exception:
                log.exception("observability HTTP server could not be built")
                listener.close()
                with self._server_lock:
                    self._building = False
                return
            with self._server_lock:
                self._building = False
                if not stopping.is_set():
                    self._server = server
        from waitress import wasyncore

        try:
            while not stopping.is_set():
                wasyncore.loop(timeout=LOOP_TIMEOUT, use_poll=True, map=socket_map, count=1)
        except Exception:
            log.exception("observability HTTP loop failed")
        finally:
            with self._server_lock:  # first, so that stop() no longer pulls the trigger closed below
                if self._server is server:
                    self._server = None
            server.task_dispatcher.shutdown(cancel_pending=True, timeout=2)
            wasyncore.close_all(socket_map)

    # -- endpoint bodies, also usable without HTTP ---------------------------------------------

    def healthz(self) -> tuple[int, str]:
        ok, reason = self._liveness().check()
        return (200, "ok\n") if ok else (503, reason + "\n")

    def readyz(self) -> tuple[int, str]:
        from hcs_deviceplugin.observability.probes import readiness

        config = self.daemon.config
        ready, reasons = readiness(self.daemon.view(), config.plugin_dir / config.kubelet_socket_name)
        return (200, "ok\n") if ready else (503, "".join(r + "\n" for r in reasons))

    def report(self) -> dict[str, Any]:
        from hcs_deviceplugin.observability.report import build_report

        links = self._links() if self._links is not None else None
        return build_report(self.daemon.view(), self.daemon.config.node_name, links)

    # -- WSGI ------------------------------------------------------------------------------------

    def wsgi(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI application: route, answer, and for HEAD send the headers of GET without a body."""
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        if method not in ("GET", "HEAD"):
            status, headers, body = _text(405, f"{method} is not supported: use GET or HEAD\n")
            headers.append(("Allow", "GET, HEAD"))
        else:
            try:
                status, headers, body = self._route(path, environ)
            except Exception as exc:
                log.exception("observability %s failed", path, extra={"path": path})
                status, headers, body = _text(500, f"{type(exc).__name__}: {exc}\n")
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {STATUS_TEXT.get(status, '')}".rstrip(), headers)
        return [b""] if method == "HEAD" else [body]

    def _route(self, path: str, environ: WSGIEnvironment) -> Response:
        if path == "/metrics":
            return self._scrape(environ)
        if path == "/healthz":
            return _text(*self.healthz())
        if path == "/readyz":
            return _text(*self.readyz())
        if path == "/report" and self.report_access != "off":
            if not report_allowed(self.report_access, str(environ.get("REMOTE_ADDR", ""))):
                return _text(
                    403,
                    "/report names the pods holding each device and answers only on localhost: "
                    "run `hcs-deviceplugin inspect` in the pod (kubectl exec) or through kubectl "
                    "port-forward, or start the daemon with --report-access=any\n",
                )
            return 200, [("Content-Type", JSON_TYPE)], (json.dumps(self.report(), indent=2) + "\n").encode()
        served = [p for p in PATHS if p != "/report" or self.report_access != "off"]
        return _text(404, f"not found: try {' '.join(served)}\n")

    def _scrape(self, environ: WSGIEnvironment) -> Response:
        """The exposition, gzipped if the client accepts it; ``?name[]=x`` keeps only samples named x."""
        body = self.metrics.registry.exposition(requested_names(str(environ.get("QUERY_STRING", ""))))
        headers = [("Content-Type", CONTENT_TYPE)]
        if accepts_gzip(str(environ.get("HTTP_ACCEPT_ENCODING", ""))):
            body = gzip_compress(body)
            headers.append(("Content-Encoding", "gzip"))
        return 200, headers, body


def _text(status: int, text: str) -> Response:
    return status, [("Content-Type", TEXT)], text.encode()
