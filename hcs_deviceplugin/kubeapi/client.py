"""JSON over HTTP/1.1 to the apiserver, on ``http.client`` and ``ssl``; lists and watches as streams.

Two kinds of call:

* :meth:`KubeClient.request`: one JSON request, one JSON answer, over a kept-alive connection (a
  few idle ones are kept, so the node labeler's and the Event recorder's calls do not pay a TLS
  handshake each). A connection the server closed while idle is noticed on use and the request is
  sent once more on a fresh one: that failure happens before the server read the request.
* :meth:`KubeClient.stream`: a GET whose body is read as it arrives (a list, or a watch that lasts
  minutes), on a connection of its own that is closed with it. :meth:`StreamResponse.shutdown`
  unblocks a read in another thread at once, which is how a source stops without waiting for the
  watch's next event.

A non-2xx answer raises :class:`ApiError` carrying the status, the reason phrase and the Status
``message`` the apiserver sends (``HTTP 410 Gone: too old resource version: 1 (5)``). A transport
failure raises ``OSError`` (timeouts included; :class:`ApiConnectionError` for a broken HTTP
exchange). Every call takes a ``(connect, read)`` timeout in seconds.

Proxies are not used, from the environment or elsewhere: the apiserver is reached directly, as the
in-cluster service address always is.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from hcs_deviceplugin import __version__
from hcs_deviceplugin.kubeapi.config import ClusterConfig, KubeConfigError
from hcs_deviceplugin.kubeapi.tokens import StaticToken, TokenFile, TokenSource

__all__ = ["ApiConnectionError", "ApiError", "KubeClient", "StreamResponse", "Timeout"]

Timeout = tuple[float, float]
"""(connect, read) seconds."""

_MAX_IDLE = 4
"""Idle kept-alive connections; the daemon's request-answer callers are two threads."""

_MAX_ERROR_BODY = 1 << 20
"""Bytes of an error answer read for its message; an error Status is far smaller."""

_READ_SIZE = 64 * 1024

_USER_AGENT = f"hcs-deviceplugin/{__version__}"


class ApiError(Exception):
    """The apiserver answered with a non-2xx status; ``message`` is its Status ``message`` if any."""

    def __init__(self, status: int, reason: str, body: bytes = b"") -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.message = _status_message(body)
        super().__init__(f"HTTP {status} {reason}" + (f": {self.message}" if self.message else ""))


class ApiConnectionError(ConnectionError):
    """The HTTP exchange broke off (a connection closed mid-answer, a malformed answer)."""


def _status_message(body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    message = parsed.get("message") if isinstance(parsed, dict) else None
    return " ".join(str(message).split()) if message else ""


class _TlsConnection(http.client.HTTPConnection):
    """HTTPS with our own context and server name (``tls-server-name``, or the host)."""

    def __init__(
        self, host: str, port: int, *, timeout: float, context: ssl.SSLContext, server_name: str
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._context = context
        self._server_name = server_name

    def connect(self) -> None:
        super().connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)


def _tls_context(config: ClusterConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if config.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif config.ca_pem:
            context.load_verify_locations(cadata=config.ca_pem.decode("ascii", errors="replace"))
        else:
            context.load_default_certs()
    except ssl.SSLError as exc:
        raise KubeConfigError(f"certificate authority: not a PEM certificate ({exc.reason or exc})") from None
    if config.client_cert_pem:
        _load_client_certificate(context, config.client_cert_pem, config.client_key_pem)
    return context


def _load_client_certificate(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """``load_cert_chain`` takes only a path: give it an anonymous in-memory file where Linux has
    them (nothing on disk holds the key), else a private temporary file deleted at once."""
    pem = cert.rstrip(b"\n") + b"\n" + key
    try:
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("hcs-client-certificate", os.MFD_CLOEXEC)
            try:
                _write_all(fd, pem)
                context.load_cert_chain(f"/proc/self/fd/{fd}")
            finally:
                os.close(fd)
        else:  # pragma: no cover - not Linux
            with tempfile.TemporaryDirectory() as directory:
                path = Path(directory) / "client.pem"
                path.touch(mode=0o600)
                path.write_bytes(pem)
                context.load_cert_chain(str(path))
    except ssl.SSLError as exc:
        raise KubeConfigError(f"client certificate and key: {exc.reason or exc}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StreamResponse:
    """A 2xx answer whose body is read as it arrives; close it when done (or use ``with``)."""

    def __init__(
        self, connection: http.client.HTTPConnection, sock: socket.socket, response: http.client.HTTPResponse
    ) -> None:
        self._connection = connection
        self._socket = sock
        self._response = response
        self.status = response.status

    def chunks(self) -> Iterator[bytes]:
        """The body in pieces as they arrive (at most one HTTP chunk each), until it ends."""
        while True:
            try:
                data = self._response.read1(_READ_SIZE)
            except http.client.HTTPException as exc:
                raise ApiConnectionError(f"answer broken off: {exc!r}") from None
            if not data:
                return
            yield data

    def lines(self) -> Iterator[str]:
        """The body's non-blank lines, stripped, as they arrive: a watch's events, one JSON object a
        line. A line may span chunks or share one with others, and a chunk may end inside a UTF-8
        character; a last line without its newline is still yielded when the body ends."""
        buffer = bytearray()
        for chunk in self.chunks():
            start = len(buffer)
            buffer.extend(chunk)
            if buffer.find(b"\n", start) < 0:
                continue
            *complete, rest = buffer.split(b"\n")
            for line in complete:
                if text := line.decode("utf-8", errors="replace").strip():
                    yield text
            buffer = bytearray(rest)
        if text := buffer.decode("utf-8", errors="replace").strip():
            yield text

    def read(self) -> bytes:
        """The whole body."""
        try:
            return self._response.read()
        except http.client.HTTPException as exc:
            raise ApiConnectionError(f"answer broken off: {exc!r}") from None

    def shutdown(self) -> None:
        """Make a read blocked in another thread return now: shut the socket down for reading.

        The plain socket's ``shutdown`` is called even on a TLS socket: ``SSLSocket.shutdown`` would
        also drop its TLS state under the reader's feet.
        """
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self._socket, socket.SHUT_RD)

    def close(self) -> None:
        self._response.close()
        self._connection.close()

    def __enter__(self) -> StreamResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KubeClient:
    """The apiserver of one :class:`ClusterConfig`; thread-safe. :class:`KubeConfigError` here when
    the TLS material or the token file cannot be used."""

    def __init__(self, config: ClusterConfig) -> None:
        parts = urlsplit(config.server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise KubeConfigError(f"server {config.server!r} is not an http(s) URL")
        try:
            port = parts.port
        except ValueError:
            raise KubeConfigError(f"server {config.server!r}: bad port") from None
        # Always given: http.client would read a port out of an IPv6 host left without one.
        self._port: int = port or (443 if parts.scheme == "https" else 80)
        self._host = parts.hostname
        self._prefix = parts.path.rstrip("/")
        self._tls = _tls_context(config) if parts.scheme == "https" else None
        self._server_name = config.tls_server_name or self._host
        self.server = config.server
        self._token: TokenSource
        if config.token_file is not None:
            try:
                self._token = TokenFile(config.token_file)
            except (OSError, ValueError) as exc:
                raise KubeConfigError(f"token file {config.token_file}: {_reason(exc)}") from None
        else:
            self._token = StaticToken(config.token)
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._closed = False

    # --- calls ---------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: Timeout,
    ) -> Any:
        """One request; the answer's JSON (None for an empty body). :class:`ApiError` on non-2xx."""
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(content_type if data is not None else "")
        target = self._target(path, query)
        reused = self._take_idle()
        if reused is not None:
            try:
                return self._exchange(reused, method, target, data, headers, timeout)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                pass  # closed by the server while idle: once more on a fresh connection
        return self._exchange(self._connect(timeout), method, target, data, headers, timeout)

    def stream(
        self, path: str, *, query: Mapping[str, str] | None = None, timeout: Timeout
    ) -> StreamResponse:
        """A GET whose body is read as it arrives, on its own connection. :class:`ApiError` on non-2xx."""
        connection = self._connect(timeout)
        sock = connection.sock
        assert isinstance(sock, socket.socket)
        try:
            connection.request("GET", self._target(path, query), headers=self._headers(""))
            response = connection.getresponse()
            if not 200 <= response.status < 300:
                raise ApiError(response.status, response.reason, response.read(_MAX_ERROR_BODY))
        except BaseException as exc:
            connection.close()
            if isinstance(exc, http.client.HTTPException) and not isinstance(exc, OSError):
                raise ApiConnectionError(f"request failed: {exc!r}") from None
            raise
        return StreamResponse(connection, sock, response)

    def close(self) -> None:
        """Close the idle connections; open streams are their owners' to close."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------------------

    def _target(self, path: str, query: Mapping[str, str] | None) -> str:
        return self._prefix + path + (f"?{urlencode(query)}" if query else "")

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        token = self._token.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _connect(self, timeout: Timeout) -> http.client.HTTPConnection:
        connect, read = timeout
        connection: http.client.HTTPConnection
        if self._tls is not None:
            connection = _TlsConnection(
                self._host, self._port, timeout=connect, context=self._tls, server_name=self._server_name
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=connect)
        try:
            connection.connect()
        except BaseException:
            connection.close()
            raise
        assert connection.sock is not None
        connection.sock.settimeout(read)
        return connection

    def _exchange(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: Timeout,
    ) -> Any:
        try:
            if connection.sock is not None:
                connection.sock.settimeout(timeout[1])
            connection.request(method, target, body=data, headers=dict(headers))
            response = connection.getresponse()
            if not 200 <= response.status < 300:
                raise ApiError(response.status, response.reason, response.read(_MAX_ERROR_BODY))
            payload = response.read()
        except BaseException as exc:
            connection.close()
            if isinstance(exc, http.client.HTTPException) and not isinstance(exc, OSError):
                raise ApiConnectionError(f"{method} failed: {exc!r}") from None
            raise
        self._give_back(connection, response)
        if not payload.strip():
            return None
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise ApiConnectionError(f"{method} answer is not JSON ({exc})") from None

    def _take_idle(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give_back(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
        with self._lock:
            if not response.will_close and not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(connection)
                return
        connection.close()


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else None) or str(exc)
