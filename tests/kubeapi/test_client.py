"""The client over real sockets: TLS verified against a CA made for the run, client certificates,
a rotating token file, errors as the apiserver sends them, streams cut anywhere, kept-alive
connections the server drops, and a blocked read interrupted from another thread."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.kubeapi.client import ApiConnectionError, ApiError, KubeClient
from hcs_deviceplugin.kubeapi.config import ClusterConfig, KubeConfigError, in_cluster_config, load_kubeconfig
from tests.kubeapi.certs import CLIENT_NAME, Pki, make_pki
from tests.kubeapi.server import Reply, ScriptedServer, Seen

TIMEOUT = (5.0, 5.0)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def server_tls(pki: Pki, client_certs: ssl.VerifyMode = ssl.CERT_OPTIONAL) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.load_verify_locations(pki.ca)
    context.verify_mode = client_certs
    return context


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[ScriptedServer]:
    with ScriptedServer(server_tls(pki)) as server:
        yield server


# --- TLS -----------------------------------------------------------------------------------------------


def test_the_server_is_verified_against_the_configured_ca(tls_server: ScriptedServer, pki: Pki) -> None:
    tls_server.script = lambda seen: Reply(body=b'{"kind": "Node"}')
    with KubeClient(ClusterConfig(tls_server.url("localhost"), ca_pem=pki.ca.read_bytes())) as client:
        assert client.request("GET", "/api/v1/nodes/n", timeout=TIMEOUT) == {"kind": "Node"}


def test_a_server_the_ca_did_not_sign_is_refused(tls_server: ScriptedServer, pki: Pki) -> None:
    with (
        KubeClient(
            ClusterConfig(tls_server.url("localhost"), ca_pem=pki.stranger_cert.read_bytes())
        ) as client,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        client.request("GET", "/api/v1/nodes/n", timeout=TIMEOUT)
    assert tls_server.requests() == []


def test_the_name_checked_is_the_host_unless_tls_server_name_says_otherwise(
    tls_server: ScriptedServer, pki: Pki
) -> None:
    """The certificate does not name 127.0.0.1; ``tls-server-name`` names what it does carry."""
    ca = pki.ca.read_bytes()
    with (
        KubeClient(ClusterConfig(tls_server.url("127.0.0.1"), ca_pem=ca)) as client,
        pytest.raises(ssl.SSLCertVerificationError, match=r"127\.0\.0\.1"),
    ):
        client.request("GET", "/version", timeout=TIMEOUT)
    named = ClusterConfig(tls_server.url("127.0.0.1"), ca_pem=ca, tls_server_name="kubernetes.default.svc")
    with KubeClient(named) as client:
        assert client.request("GET", "/version", timeout=TIMEOUT) == {}


def test_insecure_skip_tls_verify_accepts_any_server(tls_server: ScriptedServer) -> None:
    with KubeClient(ClusterConfig(tls_server.url("127.0.0.1"), insecure_skip_tls_verify=True)) as client:
        assert client.request("GET", "/version", timeout=TIMEOUT) == {}


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv6_server_in_brackets(pki: Pki) -> None:
    with ScriptedServer(server_tls(pki), host="::1") as server:
        config = in_cluster_config(
            {"KUBERNETES_SERVICE_HOST": "::1", "KUBERNETES_SERVICE_PORT": str(server.port)},
            service_account(server_dir(pki), pki, "t0k"),
        )
        with KubeClient(config) as client:
            assert client.request("GET", "/version", timeout=TIMEOUT) == {}
        (seen,) = server.requests()
        assert seen.headers["Host"] == f"[::1]:{server.port}"


def server_dir(pki: Pki) -> Path:
    directory = pki.ca.parent / "sa"
    directory.mkdir(exist_ok=True)
    return directory


# --- client certificates -------------------------------------------------------------------------------


def test_a_client_certificate_from_kubeconfig_data_is_presented(pki: Pki, tmp_path: Path) -> None:
    with ScriptedServer(server_tls(pki, ssl.CERT_REQUIRED)) as server:
        config = ClusterConfig(
            server.url("localhost"),
            ca_pem=pki.ca.read_bytes(),
            client_cert_pem=pki.client_cert.read_bytes(),
            client_key_pem=pki.client_key.read_bytes(),
        )
        with KubeClient(config) as client:
            client.request("GET", "/version", timeout=TIMEOUT)
        assert [s.client_name for s in server.requests()] == [CLIENT_NAME]
        assert list(tmp_path.iterdir()) == []  # nothing written to disk for it


def test_client_certificate_files_through_a_kubeconfig(pki: Pki, tmp_path: Path) -> None:
    with ScriptedServer(server_tls(pki, ssl.CERT_REQUIRED)) as server:
        path = tmp_path / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {
                                "server": server.url("localhost"),
                                "certificate-authority": str(pki.ca),
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": "u",
                            "user": {
                                "client-certificate": str(pki.client_cert),
                                "client-key": str(pki.client_key),
                            },
                        }
                    ],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        with KubeClient(load_kubeconfig(path)) as client:
            client.request("GET", "/version", timeout=TIMEOUT)
        assert [s.client_name for s in server.requests()] == [CLIENT_NAME]


def test_without_a_client_certificate_a_server_that_requires_one_refuses(pki: Pki) -> None:
    with ScriptedServer(server_tls(pki, ssl.CERT_REQUIRED)) as server:
        config = ClusterConfig(server.url("localhost"), ca_pem=pki.ca.read_bytes())
        with KubeClient(config) as client, pytest.raises(OSError):
            client.request("GET", "/version", timeout=TIMEOUT)
        assert server.requests() == []


@pytest.mark.parametrize(
    ("cert", "key", "message"),
    [
        ("client_cert", "stranger_key", "client certificate and key"),
        ("ca", "ca", "client certificate and key"),
    ],
)
def test_a_certificate_and_key_that_do_not_load_fail_at_construction(
    pki: Pki, cert: str, key: str, message: str
) -> None:
    config = ClusterConfig(
        "https://localhost:1",
        client_cert_pem=getattr(pki, cert).read_bytes(),
        client_key_pem=getattr(pki, key).read_bytes(),
    )
    with pytest.raises(KubeConfigError, match=message):
        KubeClient(config)


def test_a_ca_that_is_not_pem_fails_at_construction() -> None:
    with pytest.raises(KubeConfigError, match="certificate authority"):
        KubeClient(ClusterConfig("https://localhost:1", ca_pem=b"-----BEGIN CERTIFICATE-----\nxx\n"))


# --- tokens --------------------------------------------------------------------------------------------


def service_account(directory: Path, pki: Pki, token: str) -> Path:
    """A projected service-account volume as kubelet writes it: the files are symlinks into
    ``..data``, itself a symlink to a timestamped folder that is swapped on rotation."""
    (directory / "ca.crt").write_bytes(pki.ca.read_bytes())
    rotate(directory, token)
    if not (directory / "token").is_symlink():
        (directory / "token").symlink_to("..data/token")
    return directory


def rotate(directory: Path, token: str) -> None:
    version = directory / f"..{token}"
    version.mkdir()
    (version / "token").write_text(token)
    (directory / "..data_tmp").symlink_to(version.name)
    os.replace(directory / "..data_tmp", directory / "..data")


def bearers(server: ScriptedServer) -> list[str]:
    return [s.headers.get("Authorization", "") for s in server.requests()]


def test_a_rotated_service_account_token_is_sent_on_the_next_request(pki: Pki, tmp_path: Path) -> None:
    with ScriptedServer(server_tls(pki)) as server:
        config = in_cluster_config(
            {"KUBERNETES_SERVICE_HOST": "localhost", "KUBERNETES_SERVICE_PORT": str(server.port)},
            service_account(tmp_path, pki, "first"),
        )
        with KubeClient(config) as client:
            client.request("GET", "/version", timeout=TIMEOUT)
            rotate(tmp_path, "second")
            client.request("GET", "/version", timeout=TIMEOUT)
            client.request("GET", "/version", timeout=TIMEOUT)
            with client.stream("/api/v1/nodes", timeout=TIMEOUT) as listing:
                listing.read()
        assert bearers(server) == ["Bearer first", "Bearer second", "Bearer second", "Bearer second"]


def test_a_token_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url(), token_file=token)) as client:
        client.request("GET", "/version", timeout=TIMEOUT)
        token.write_text("second-and-longer")
        client.request("GET", "/version", timeout=TIMEOUT)
        token.unlink()  # mid-rotation: the last token read is still sent
        client.request("GET", "/version", timeout=TIMEOUT)
    assert bearers(server) == ["Bearer first", "Bearer second-and-longer", "Bearer second-and-longer"]


def test_a_static_token_and_no_token() -> None:
    with ScriptedServer() as server:
        with KubeClient(ClusterConfig(server.url(), token=" abc\n")) as client:
            client.request("GET", "/version", timeout=TIMEOUT)
        with KubeClient(ClusterConfig(server.url())) as client:
            client.request("GET", "/version", timeout=TIMEOUT)
    assert bearers(server) == ["Bearer abc", ""]


def test_a_missing_token_file_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="token file"):
        KubeClient(ClusterConfig("http://127.0.0.1:1", token_file=tmp_path / "none"))


# --- requests and errors -------------------------------------------------------------------------------


def status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": reason,
            "message": message,
            "code": code,
        }
    ).encode()


GONE = "too old resource version: 1 (5)"
ERRORS = {
    "not found": (404, None, status(404, "NotFound", "no n"), "HTTP 404 Not Found: no n"),
    "gone": (410, None, status(410, "Expired", GONE), f"HTTP 410 Gone: {GONE}"),
    "conflict": (409, None, status(409, "Conflict", "modified"), "HTTP 409 Conflict: modified"),
    "no Status body": (500, None, b"<html>oops</html>", "HTTP 500 Internal Server Error"),
    "own reason phrase": (429, "Slow Down", b"", "HTTP 429 Slow Down"),
    "message over lines": (422, None, status(422, "Invalid", "a\n  b"), "HTTP 422 Unprocessable Entity: a b"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
@pytest.mark.parametrize("call", ["request", "stream"])
def test_an_error_answer_keeps_its_status_and_message(case: str, call: str) -> None:
    code, reason, body, text = ERRORS[case]
    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url())) as client:
        server.script = lambda seen: Reply(code, body, reason)
        with pytest.raises(ApiError) as caught:
            if call == "request":
                client.request("PATCH", "/api/v1/nodes/n", body={}, timeout=TIMEOUT)
            else:
                client.stream("/api/v1/nodes", timeout=TIMEOUT)
    assert caught.value.status == code
    assert str(caught.value) == text


def test_a_request_sends_json_with_its_content_type_and_query() -> None:
    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url() + "/prefix/")) as client:
        server.script = lambda seen: Reply(body=b"")
        answer = client.request(
            "PATCH",
            "/api/v1/nodes/n",
            query={"fieldManager": "hcs", "labelSelector": "a=b,c in (d)"},
            body={"metadata": {"labels": {"x": None}}},
            content_type="application/merge-patch+json",
            timeout=TIMEOUT,
        )
    assert answer is None
    (seen,) = server.requests()
    assert seen.method == "PATCH"
    assert seen.path == "/prefix/api/v1/nodes/n?fieldManager=hcs&labelSelector=a%3Db%2Cc+in+%28d%29"
    assert seen.headers["Content-Type"] == "application/merge-patch+json"
    assert seen.headers["Accept"] == "application/json"
    assert json.loads(seen.body) == {"metadata": {"labels": {"x": None}}}


def test_an_answer_that_is_not_json_is_a_connection_error() -> None:
    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url())) as client:
        server.script = lambda seen: Reply(body=b"<html>")
        with pytest.raises(ApiConnectionError, match="not JSON"):
            client.request("GET", "/version", timeout=TIMEOUT)


def test_a_connection_is_kept_alive_and_one_the_server_dropped_is_replaced() -> None:
    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url())) as client:
        for _ in range(3):
            client.request("GET", "/version", timeout=TIMEOUT)
        assert server.connections == 1
        server.script = lambda seen: Reply(drop_after=True)  # as an idle timeout on the server would
        client.request("GET", "/version", timeout=TIMEOUT)
        server.script = lambda seen: Reply()
        assert client.request("GET", "/version", timeout=TIMEOUT) == {}
        assert len(server.requests()) == 5  # the stale connection's attempt never reached it
        assert server.connections == 2


def test_a_silent_server_times_out_on_read() -> None:
    release = threading.Event()

    def slow(seen: Seen) -> Reply:
        release.wait(5)
        return Reply()

    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url())) as client:
        client.request("GET", "/version", timeout=TIMEOUT)  # kept alive: the next call sets its own
        server.script = slow
        try:
            with pytest.raises(TimeoutError):
                client.request("GET", "/version", timeout=(5.0, 0.2))
        finally:
            release.set()


def test_a_silent_watch_times_out_on_read() -> None:
    """A half-open watch connection must end in the read timeout, not hang for TCP's hours."""
    release = threading.Event()

    def held(seen: Seen) -> Reply:
        def body() -> Iterator[bytes]:
            yield EVENTS[0] + b"\n"
            release.wait(5)

        return Reply(body=body())

    with ScriptedServer() as server, KubeClient(ClusterConfig(server.url())) as client:
        server.script = held
        try:
            with client.stream("/w", timeout=(5.0, 0.2)) as response:
                lines = response.lines()
                assert next(lines) == EVENTS[0].decode()
                with pytest.raises(TimeoutError):
                    next(lines)
        finally:
            release.set()


def test_nothing_listening_is_an_os_error() -> None:
    with ScriptedServer() as probe:
        url = probe.url()
    with KubeClient(ClusterConfig(url)) as client, pytest.raises(ConnectionRefusedError):
        client.request("GET", "/version", timeout=TIMEOUT)


# --- streams -------------------------------------------------------------------------------------------


EVENTS = [
    b'{"type":"ADDED","object":{"metadata":{"name":"caf\xc3\xa9"}}}',
    b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}',
    b'{"type":"DELETED","object":{"metadata":{"name":"b"}}}',
]
BODY = b"\n".join(EVENTS) + b"\n"


def cut(body: bytes, at: list[int]) -> list[bytes]:
    points = [0, *sorted(set(at)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


@pytest.fixture(scope="module")
def stream_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


CUTS = {
    "one chunk": [],
    "each event its own chunk": [len(EVENTS[0]) + 1, len(EVENTS[0]) + len(EVENTS[1]) + 2],
    "inside an event": [10],
    "inside a UTF-8 character": [BODY.index(b"\xc3") + 1],
    "at a newline": [BODY.index(b"\n")],
    "one byte a chunk": list(range(1, len(BODY))),
}


@pytest.mark.parametrize("case", sorted(CUTS))
def test_a_watch_cut_anywhere_gives_the_same_events(case: str, stream_server: ScriptedServer) -> None:
    stream_server.script = lambda seen: Reply(body=cut(BODY, CUTS[case]))
    with (
        KubeClient(ClusterConfig(stream_server.url())) as client,
        client.stream("/api/v1/configmaps", query={"watch": "true"}, timeout=TIMEOUT) as response,
    ):
        lines = list(response.lines())
    assert lines == [e.decode() for e in EVENTS]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.text(alphabet=st.characters(blacklist_characters="\r\n", codec="utf-8"), min_size=1),
        max_size=5,
    ),
    at=st.lists(st.integers(min_value=1, max_value=400), max_size=8),
    final_newline=st.booleans(),
)
def test_lines_do_not_depend_on_where_the_chunks_fall(
    stream_server: ScriptedServer, lines: list[str], at: list[int], final_newline: bool
) -> None:
    body = "\n".join(lines).encode() + (b"\n" if final_newline else b"")
    stream_server.script = lambda seen: Reply(body=cut(body, [a for a in at if a < len(body)]))
    with (
        KubeClient(ClusterConfig(stream_server.url())) as client,
        client.stream("/w", timeout=TIMEOUT) as response,
    ):
        got = list(response.lines())
    assert got == [line.strip() for line in lines if line.strip()]


@pytest.mark.parametrize("tls", [False, True])
def test_shutdown_unblocks_a_read_in_another_thread(tls: bool, pki: Pki) -> None:
    release = threading.Event()

    def held(seen: Seen) -> Reply:
        def body() -> Iterator[bytes]:
            yield EVENTS[0] + b"\n"
            release.wait(10)

        return Reply(body=body())

    context = server_tls(pki) if tls else None
    with ScriptedServer(context) as server:
        server.script = held
        config = ClusterConfig(server.url("localhost"), ca_pem=pki.ca.read_bytes())
        with KubeClient(config) as client, client.stream("/w", timeout=(5.0, 30.0)) as response:
            received: list[str] = []
            ended = threading.Event()

            def read() -> None:
                with contextlib.suppress(OSError):
                    received.extend(response.lines())
                ended.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert not ended.wait(0.2)  # blocked after the first event
            response.shutdown()
            assert ended.wait(5), "the read did not return after shutdown"
        release.set()
    assert received == [EVENTS[0].decode()]


def test_a_stream_cut_off_mid_chunk_is_a_connection_error() -> None:
    """A watch whose connection ends without the terminating chunk: an error the source resumes
    from, never a clean end that would look like the server's timeoutSeconds."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + f"{len(EVENTS[0]) + 1:x}\r\n".encode()
                    + EVENTS[0]
                    + b"\n\r\n"
                    + b"40\r\n{partial"
                )

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        received: list[str] = []
        with (
            KubeClient(ClusterConfig(f"http://127.0.0.1:{port}")) as client,
            client.stream("/w", timeout=TIMEOUT) as response,
            pytest.raises(ApiConnectionError),
        ):
            received.extend(response.lines())
        thread.join(5)
    assert received == [EVENTS[0].decode()]
