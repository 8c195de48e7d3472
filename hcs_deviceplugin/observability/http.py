"""The daemon's HTTP side: ``/metrics``, ``/healthz``, ``/readyz`` and ``/report`` on one port.

A stdlib ``ThreadingHTTPServer`` is enough: scrapes and probes are a few requests a minute, each
answered from one ``Daemon.view()`` in microseconds, and it adds no dependency. Each request runs on
its own thread, so a slow client never delays a probe. Handlers only read the daemon's state.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import choose_encoder

from hcs_deviceplugin.daemon import Daemon
from hcs_deviceplugin.model import LinkMatrix
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.observability.probes import DEFAULT_TIMEOUT, LivenessProbe, readiness
from hcs_deviceplugin.observability.report import build_report

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
TEXT = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"

LinksFunction = Callable[[], LinkMatrix]


class ObservabilityServer:
    """Serves the four endpoints for one daemon; ``port=0`` picks a free port (read ``.port``).

    ``links`` supplies the card-to-card link matrix for ``/report`` (the daemon view has none); the
    report lists no links without it. ``metrics`` is bound to the daemon's view here unless it
    already is, so one call wires everything.
    """

    def __init__(
        self,
        daemon: Daemon,
        metrics: Metrics,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        links: LinksFunction | None = None,
        liveness_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.daemon = daemon
        self.metrics = metrics
        self.host = host
        self._requested_port = port
        self._links = links
        self._liveness = LivenessProbe(daemon, liveness_timeout)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        if not metrics.bound:
            metrics.bind(daemon.view)

    @property
    def port(self) -> int:
        """The bound port (the requested one until :meth:`start`)."""
        if self._httpd is None:
            return self._requested_port
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Bind and serve on a background thread; raises OSError if the port is taken."""
        if self._httpd is not None:
            return
        handler = _handler_for(self)
        httpd = ThreadingHTTPServer((self.host, self._requested_port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="observability-http", daemon=True
        )
        self._thread.start()
        log.info("observability endpoints on %s (/metrics /healthz /readyz /report)", self.url)

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = None
        self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    # -- endpoint bodies, also usable without HTTP ---------------------------------------------

    def healthz(self) -> tuple[int, str]:
        ok, reason = self._liveness.check()
        return (200, "ok\n") if ok else (503, reason + "\n")

    def readyz(self) -> tuple[int, str]:
        config = self.daemon.config
        ready, reasons = readiness(self.daemon.view(), config.plugin_dir / config.kubelet_socket_name)
        return (200, "ok\n") if ready else (503, "".join(r + "\n" for r in reasons))

    def report(self) -> dict[str, Any]:
        links = self._links() if self._links is not None else None
        return build_report(self.daemon.view(), self.daemon.config.node_name, links)

    def metrics_body(self, accept: str) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept)
        return encoder(self.metrics.registry), content_type


def _handler_for(server: ObservabilityServer) -> type[BaseHTTPRequestHandler]:
    """A handler class closed over ``server`` (http.server instantiates the class per request)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "hcs-deviceplugin"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    body, content_type = server.metrics_body(self.headers.get("Accept", ""))
                    self._send(200, body, content_type)
                elif path == "/healthz":
                    self._send_text(*server.healthz())
                elif path == "/readyz":
                    self._send_text(*server.readyz())
                elif path == "/report":
                    text = json.dumps(server.report(), indent=2) + "\n"
                    self._send(200, text.encode(), JSON_TYPE)
                else:
                    self._send_text(404, "not found: try /metrics /healthz /readyz /report\n")
            except Exception as exc:
                log.exception("observability %s failed", path)
                self._send_text(500, f"{type(exc).__name__}: {exc}\n")

        def _send_text(self, status: int, text: str) -> None:
            self._send(status, text.encode(), TEXT)

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
