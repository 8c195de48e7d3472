"""``/healthz`` and ``/readyz`` over HTTP, and the liveness rules on their own."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
import zlib
from collections.abc import Mapping
from typing import Any

import pytest

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.observability.http import THREADS, ObservabilityServer, is_loopback
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.observability.probes import LivenessProbe, alive
from hcs_deviceplugin.plugin.server import RegistrationStatus
from tests.integration.conftest import H100, WAIT, card_pool, pool_doc
from tests.observability.conftest import Busy, Start, parse_samples, value


def test_healthz_and_readyz_are_ok_on_a_registered_node(busy: Busy) -> None:
    assert busy.obs.get("/healthz") == (200, "ok\n")
    assert busy.obs.get("/readyz") == (200, "ok\n")


def test_metrics_content_type_and_unknown_paths(busy: Busy) -> None:
    status, body = busy.obs.get("/nope")
    assert status == 404 and "/metrics" in body
    with urllib.request.urlopen(busy.obs.url + "/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")


PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=underscores;q=0.3,"
    "text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
)
"""What Prometheus 3 sends when it scrapes: OpenMetrics first; text 0.0.4 is among what it takes."""


def _scrape(busy: Busy, method: str = "GET", query: str = "", **headers: str) -> tuple[dict[str, str], bytes]:
    request = urllib.request.Request(busy.obs.url + "/metrics" + query, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
        return dict(response.headers), response.read()


def test_metrics_are_text_0_0_4_whatever_the_client_asks_first(busy: Busy) -> None:
    for accept in ("", PROMETHEUS_ACCEPT, "application/openmetrics-text", "text/plain;version=1.0.0"):
        headers, body = _scrape(busy, **({"Accept": accept} if accept else {}))
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8", accept
        assert "Content-Encoding" not in headers
        assert body.startswith(b"# HELP ")


def test_metrics_are_gzipped_when_the_client_accepts_gzip(busy: Busy) -> None:
    headers, body = _scrape(busy, **{"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"
    assert int(headers["Content-Length"]) == len(body)
    text = zlib.decompress(body, 16 + zlib.MAX_WBITS).decode()
    assert value(parse_samples(text), "hcs_pool_units", pool="a") == 2
    refused, plain = _scrape(busy, **{"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in refused and plain.startswith(b"# HELP ")
    head, empty = _scrape(busy, "HEAD", **{"Accept-Encoding": "gzip"})
    assert head["Content-Encoding"] == "gzip" and empty == b""


def test_metrics_name_filter_keeps_only_the_samples_named(busy: Busy) -> None:
    _, body = _scrape(busy, query="?name[]=hcs_pool_units&name[]=hcs_config_reloads_total")
    names = {name for name, _, _ in parse_samples(body.decode())}
    assert names == {"hcs_pool_units", "hcs_config_reloads_total"}


def test_readyz_names_the_pool_that_cannot_register_until_kubelet_is_back(observed: Start) -> None:
    obs = observed(pool_doc(card_pool("a", H100[0]), card_pool("team-b", H100[1])), kubelet_running=False)

    def retrying(v: DaemonView) -> bool:
        return all(
            p.server.status is RegistrationStatus.RETRYING and p.server.last_error for p in v.pools.values()
        )

    obs.daemon.wait_for(retrying, WAIT, "registration retrying")
    status, body = obs.get("/readyz")
    assert status == 503
    lines = body.splitlines()
    assert [line.split(": ")[:2] for line in lines[:2]] == [
        ["pool a", "registration retrying"],
        ["pool team-b", "registration retrying"],
    ]
    assert all(len(line.split(": ", 2)[2]) > 0 for line in lines[:2]), "last error given"
    # No kubelet, so no pod-resources either: nothing may be advertised before its first answer.
    assert lines[2].startswith("2 card(s) held back until pod-resources answers: ")
    assert "pr.sock does not exist" in lines[2]
    assert len(lines) == 3
    assert obs.get("/healthz") == (200, "ok\n")  # kubelet being down is no reason to restart us

    obs.node.kubelet.start()
    obs.daemon.wait_for(lambda v: v.all_registered() and not v.awaiting, WAIT, "registered and read")
    assert obs.get("/readyz") == (200, "ok\n")


def test_readyz_lists_config_errors_one_per_line(observed: Start) -> None:
    obs = observed(pool_doc(card_pool("a", H100[0])))
    obs.node.wait_registered("a")
    obs.node.write_pools("version: v1\npools:\n  - name: a\n    slicesPerUnit: 100\n    devices: []\n")
    view = obs.daemon.wait_for(lambda v: bool(v.config_errors), WAIT, "config error reported")
    status, body = obs.get("/readyz")
    assert status == 503
    lines = body.splitlines()
    assert len(lines) == len(view.config_errors)
    assert all(line.startswith("config: ") for line in lines)
    assert "slicesPerUnit" in body
    assert obs.get("/healthz") == (200, "ok\n")  # the last good pools are still served


class _FakeDaemon:
    """Just enough daemon for the liveness probe: a view that may block, thread states."""

    def __init__(self, view: DaemonView, threads: Mapping[str, bool] | None = None) -> None:
        self._view = view
        self._threads = dict(threads or {})
        self.release = threading.Event()
        self.release.set()

    def view(self) -> DaemonView:
        self.release.wait()
        return self._view

    def thread_liveness(self) -> Mapping[str, bool]:
        return self._threads


def test_liveness_fails_when_the_state_lock_is_never_released(busy: Busy) -> None:
    fake = _FakeDaemon(busy.obs.daemon.view())
    probe = LivenessProbe(fake, timeout=0.05)
    assert probe.check() == (True, "ok")
    fake.release.clear()
    ok, reason = probe.check()
    assert not ok and "not readable within 0.05s" in reason
    ok, reason = probe.check()  # no second helper thread while the first is still stuck
    assert not ok and "earlier probe" in reason
    fake.release.set()
    assert probe.check() == (True, "ok")


def test_liveness_names_dead_daemon_threads(busy: Busy) -> None:
    fake = _FakeDaemon(busy.obs.daemon.view(), {"daemon-control": False, "health-simulated": True})
    assert alive(fake, timeout=1.0) == (False, "daemon thread(s) not running: daemon-control")


def _request(url: str, method: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/report"])
def test_head_answers_the_headers_of_get_without_a_body(busy: Busy, path: str) -> None:
    status, headers, body = _request(busy.obs.url + path, "HEAD")
    _, get_headers, get_body = _request(busy.obs.url + path, "GET")
    assert (status, body) == (200, b"")
    assert headers["Content-Type"] == get_headers["Content-Type"]
    if path in ("/healthz", "/readyz"):  # the same body each time: the same length
        assert int(headers["Content-Length"]) == len(get_body) > 0


def test_other_methods_are_refused_with_allow(busy: Busy) -> None:
    status, headers, _ = _request(busy.obs.url + "/metrics", "POST")
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.5", False),
        ("192.168.1.7", False),
        ("fe80::1%eth0", False),
        ("::ffff:10.0.0.5", False),
        ("", False),
        ("not-an-address", False),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def _call(server: ObservabilityServer, path: str, remote: str) -> tuple[str, bytes]:
    """One request through the server's WSGI app, as waitress would make it for a peer at ``remote``."""
    answer: list[str] = []

    def start_response(status: str, _headers: list[tuple[str, str]], _exc: object = None) -> Any:
        answer.append(status)
        return lambda _data: None

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "REMOTE_ADDR": remote, "QUERY_STRING": ""}
    body = b"".join(server.wsgi(environ, start_response))
    return answer[0], body


def test_report_answers_only_loopback_peers_unless_opened(busy: Busy) -> None:
    local = busy.obs.server
    assert local.report_access == "local"
    assert _call(local, "/report", "127.0.0.1")[0] == "200 OK"
    status, body = _call(local, "/report", "10.0.0.5")
    assert status == "403 Forbidden" and b"--report-access=any" in body
    assert _call(local, "/metrics", "10.0.0.5")[0] == "200 OK"  # Prometheus still scrapes
    assert _call(local, "/healthz", "10.0.0.5")[0] == "200 OK"

    opened = ObservabilityServer(busy.obs.daemon, Metrics(), report_access="any")
    assert _call(opened, "/report", "10.0.0.5")[0] == "200 OK"
    off = ObservabilityServer(busy.obs.daemon, Metrics(), report_access="off")
    status, body = _call(off, "/report", "127.0.0.1")
    assert status == "404 Not Found" and b"/report" not in body


def test_idle_connections_hold_no_thread_and_are_closed(busy: Busy) -> None:
    before = set(threading.enumerate())

    def new_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t not in before and t.name != "hcs-liveness-probe"}

    server = ObservabilityServer(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0, idle_timeout=1)
    server.start()
    idle: list[socket.socket] = []
    try:
        started = new_threads()
        assert len(started) <= THREADS + 1, "the event loop and the fixed worker pool"
        for _ in range(30):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as response:
            assert response.status == 200, "30 idle connections do not starve a probe"
        assert new_threads() <= started, "no thread per connection"
        for conn in idle:
            assert conn.recv(1) == b"", "the server closes an idle connection"
    finally:
        for conn in idle:
            conn.close()
        server.stop()
    assert not [t for t in started if t.is_alive()], "stop ends the loop and the workers"


def _server_threads(before: set[threading.Thread]) -> set[str]:
    return {t.name for t in threading.enumerate() if t not in before and t.name != "hcs-liveness-probe"}


def test_a_deferred_server_holds_an_early_probe_until_serve_now(busy: Busy) -> None:
    """``run`` binds the port before its pools are served and builds waitress after: a probe that
    connects in between is answered once the server is built, not refused."""
    before = set(threading.enumerate())
    server = ObservabilityServer(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0)
    server.start(defer=WAIT)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as probe:
            probe.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            assert _server_threads(before) == {"observability-http"}, "no waitress workers yet"
            server.serve_now()
            answer = b""
            while chunk := probe.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 200 ") and answer.endswith(b"ok\n")
        assert len(_server_threads(before)) == THREADS + 1, "the event loop and the worker pool"
    finally:
        server.stop()
    assert _server_threads(before) == set(), "stop ends the loop and the workers"


def test_a_deferred_server_serves_after_its_limit_without_serve_now(busy: Busy) -> None:
    server = ObservabilityServer(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0)
    server.start(defer=0.05)
    try:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=WAIT) as response:
            assert response.status == 200
    finally:
        server.stop()


def test_stopping_a_deferred_server_never_builds_it_and_frees_the_port(busy: Busy) -> None:
    before = set(threading.enumerate())
    server = ObservabilityServer(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0)
    server.start(defer=WAIT)
    port = server.port
    server.stop()
    assert _server_threads(before) == set(), "the waiting thread ended at once, nothing was built"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT).close()


def test_a_deferred_server_is_built_once_ready_returns_with_the_time_left(busy: Busy) -> None:
    """``run`` passes ``ready=daemon.wait_streaming``: after serve_now the server thread waits for
    it (with what is left of ``defer``) and only then builds waitress."""
    before = set(threading.enumerate())
    asked: list[float] = []
    called, release = threading.Event(), threading.Event()

    def ready(timeout: float) -> bool:
        asked.append(timeout)
        called.set()
        return release.wait(WAIT)

    server = ObservabilityServer(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0)
    server.start(defer=WAIT, ready=ready)
    try:
        server.serve_now()
        assert called.wait(WAIT)
        assert 0 < asked[0] <= WAIT
        assert _server_threads(before) == {"observability-http"}, "nothing built while ready waits"
        release.set()
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=WAIT) as response:
            assert response.status == 200
    finally:
        release.set()
        server.stop()
    assert _server_threads(before) == set()


def test_a_ready_that_fails_does_not_keep_the_probes_unserved(busy: Busy) -> None:
    def ready(_timeout: float) -> bool:
        raise RuntimeError("the daemon went away")

    server = ObservabilityServer(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0)
    server.start(defer=WAIT, ready=ready)
    try:
        server.serve_now()
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=WAIT) as response:
            assert response.status == 200
    finally:
        server.stop()


class _SlowBuild(ObservabilityServer):
    """The real server, whose build (waitress's imports, on a loaded node) takes until released."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.building = threading.Event()
        self.release = threading.Event()

    def _build(self, listener: socket.socket, socket_map: dict[int, Any] | None = None) -> Any:
        self.building.set()
        self.release.wait(WAIT)
        return super()._build(listener, socket_map)


def test_stop_does_not_wait_for_a_deferred_build_and_the_build_then_closes_itself(busy: Busy) -> None:
    """SIGTERM just after the pools began streaming: stop returns without waiting for waitress's
    imports; the server thread closes what it built as soon as the build is done."""
    before = set(threading.enumerate())
    server = _SlowBuild(busy.obs.daemon, Metrics(), host="127.0.0.1", port=0)
    server.start(defer=WAIT)
    port = server.port
    server.serve_now()
    assert server.building.wait(WAIT)
    (thread,) = [t for t in threading.enumerate() if t.name == "observability-http" and t not in before]
    stopped = threading.Event()

    def stop() -> None:
        server.stop()
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    # Well below the 5 s that stop() would spend joining a thread it waited for.
    assert stopped.wait(2.0), "stop waited for the build"
    assert thread.is_alive(), "the build is still going"
    server.release.set()
    thread.join(WAIT)
    assert _server_threads(before) == set(), "the built server and its workers are gone"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT).close()
