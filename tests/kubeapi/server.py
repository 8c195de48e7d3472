"""A scripted HTTP(S) server for the client's own tests: it records what each request carried
(headers, body, the client certificate's name) and answers what the test scripted, a chunked body
piece by piece included, so that chunk boundaries fall exactly where a test wants them.

The pool-level tests use :mod:`tests.pools.fakeapiserver`, which speaks the API's semantics; this
one speaks only HTTP and TLS, which is what the client itself adds.
"""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_name: str = ""
    """The client certificate's common name ("" when none was presented)."""


@dataclass
class Reply:
    """``body`` as bytes goes out with a Content-Length; as an iterable, chunked, one chunk a piece,
    each flushed before the next is taken (a generator may wait in between)."""

    status: int = 200
    body: bytes | Iterable[bytes] = b"{}"
    reason: str | None = None
    drop_after: bool = False
    """Close the connection after this reply without saying so (an idle timeout on the server)."""
    headers: dict[str, str] = field(default_factory=dict)


Script = Callable[[Seen], Reply]


class ScriptedServer:
    """``with ScriptedServer(tls) as server``: ``server.url()``; ``server.script`` answers;
    ``server.requests()`` is what came in."""

    def __init__(self, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.tls = tls
        self.host = host
        self.script: Script = lambda seen: Reply()
        self.seen: list[Seen] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    def url(self, host: str | None = None) -> str:
        name = host or self.host
        name = f"[{name}]" if ":" in name else name
        return f"{'https' if self.tls else 'http'}://{name}:{self.port}"

    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def __enter__(self) -> ScriptedServer:
        owner = self

        class Server(http.server.ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in owner.host else socket.AF_INET
            daemon_threads = True

            def finish_request(self, request: Any, client_address: Any) -> None:
                with owner._lock:
                    owner.connections += 1
                if owner.tls is not None:  # the handshake in the request's thread, not the accept loop
                    try:
                        request = owner.tls.wrap_socket(request, server_side=True)
                    except (ssl.SSLError, OSError):
                        return
                super().finish_request(request, client_address)

            def handle_error(self, request: Any, client_address: Any) -> None:
                """A client that hangs up mid-answer is part of the tests, not an error."""

        self._httpd = Server((self.host, 0), _handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def _handler(owner: ScriptedServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen = Seen(
                self.command, self.path, dict(self.headers.items()), body, _client_name(self.connection)
            )
            with owner._lock:
                owner.seen.append(seen)
            reply = owner.script(seen)
            self.send_response(reply.status, reply.reason)
            self.send_header("Content-Type", "application/json")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            if isinstance(reply.body, bytes):
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in _pieces(reply.body):
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            if reply.drop_after:
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler


def _pieces(body: Iterable[bytes]) -> Iterator[bytes]:
    for piece in body:
        if piece:  # an empty chunk would end the body
            yield piece


def _client_name(connection: socket.socket) -> str:
    if not isinstance(connection, ssl.SSLSocket):
        return ""
    cert: Any = connection.getpeercert() or {}
    names = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
    return str(names[0]) if names else ""
