"""Loading API configuration: kubeconfig variants and the in-cluster service account, as tables."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hcs_deviceplugin.kubeapi.config import (
    ClusterConfig,
    KubeConfigError,
    default_kubeconfig,
    in_cluster_config,
    load_kubeconfig,
)

CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN EC PRIVATE KEY-----\nKEY\n-----END EC PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any
) -> dict[str, Any]:
    """A kubeconfig with context ``main`` (current) → cluster ``c`` and user ``u``, and a second
    context ``other`` → cluster ``c2`` with no user."""
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://api.example:6443", **(cluster or {})}},
            {"name": "c2", "cluster": {"server": "http://127.0.0.1:8080"}},
        ],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
            {"name": "other", "context": {"cluster": "c2"}},
        ],
        "current-context": "main",
    }
    document.update(top)
    return document


# name → (kubeconfig, context, expected): paths in ``expected`` are relative to the kubeconfig's folder.
GOOD: dict[str, tuple[dict[str, Any], str | None, Callable[[Path], ClusterConfig]]] = {
    "server only": (kubeconfig(), None, lambda d: ClusterConfig("https://api.example:6443")),
    "inline data": (
        kubeconfig(
            {"certificate-authority-data": b64(CA)},
            {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY), "token": "t0k"},
        ),
        None,
        lambda d: ClusterConfig(
            "https://api.example:6443", ca_pem=CA, client_cert_pem=CERT, client_key_pem=KEY, token="t0k"
        ),
    ),
    "files, relative to the kubeconfig": (
        kubeconfig(
            {"certificate-authority": "pki/ca.crt"},
            {"client-certificate": "pki/client.crt", "client-key": "pki/client.key", "tokenFile": "token"},
        ),
        None,
        lambda d: ClusterConfig(
            "https://api.example:6443",
            ca_pem=CA,
            client_cert_pem=CERT,
            client_key_pem=KEY,
            token_file=d / "token",
        ),
    ),
    "inline data wins over a file": (
        kubeconfig({"certificate-authority-data": b64(b"inline"), "certificate-authority": "missing.crt"}),
        None,
        lambda d: ClusterConfig("https://api.example:6443", ca_pem=b"inline"),
    ),
    "insecure and tls-server-name": (
        kubeconfig({"insecure-skip-tls-verify": True, "tls-server-name": "kubernetes.default.svc"}),
        None,
        lambda d: ClusterConfig(
            "https://api.example:6443",
            insecure_skip_tls_verify=True,
            tls_server_name="kubernetes.default.svc",
        ),
    ),
    "named context, no user": (kubeconfig(), "other", lambda d: ClusterConfig("http://127.0.0.1:8080")),
    "IPv6 server": (
        kubeconfig({"server": "https://[fd00::1]:6443"}),
        None,
        lambda d: ClusterConfig("https://[fd00::1]:6443"),
    ),
}


def write_tree(directory: Path, document: object) -> Path:
    (directory / "pki").mkdir()
    (directory / "pki" / "ca.crt").write_bytes(CA)
    (directory / "pki" / "client.crt").write_bytes(CERT)
    (directory / "pki" / "client.key").write_bytes(KEY)
    path = directory / "config"
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("case", sorted(GOOD))
def test_a_kubeconfig_gives_its_cluster_and_user(case: str, tmp_path: Path) -> None:
    document, context, expected = GOOD[case]
    assert load_kubeconfig(write_tree(tmp_path, document), context) == expected(tmp_path)


BAD: dict[str, tuple[object, str | None, str]] = {
    "empty file": ("", None, "Invalid kube-config file. No configuration found."),
    "not YAML": ("clusters: [", None, "not YAML"),
    "a list": ("[1, 2]", None, "not a mapping"),
    "no current-context": ({**kubeconfig(), "current-context": ""}, None, "no current-context"),
    "unknown context": (kubeconfig(), "prod", "no context named 'prod'"),
    "context's cluster missing": (
        {**kubeconfig(), "clusters": []},
        None,
        "no cluster named 'c'",
    ),
    "no server": (kubeconfig({"server": ""}), None, "cluster 'c' has no server"),
    "server not a URL": (kubeconfig({"server": "api.example:6443"}), None, "is not an http(s) URL"),
    "proxy-url": (kubeconfig({"proxy-url": "http://proxy:3128"}), None, "proxy-url is not supported"),
    "exec plugin": (
        kubeconfig(user={"exec": {"command": "aws"}}),
        None,
        "user 'u': exec credential plugins not supported",
    ),
    "auth-provider": (kubeconfig(user={"auth-provider": {"name": "oidc"}}), None, "auth-provider plugins"),
    "basic auth": (kubeconfig(user={"username": "a", "password": "b"}), None, "basic auth"),
    "CA data not base64": (
        kubeconfig({"certificate-authority-data": "not base64!"}),
        None,
        "certificate-authority-data is not base64",
    ),
    "CA file missing": (
        kubeconfig({"certificate-authority": "nowhere.crt"}),
        None,
        "certificate-authority",
    ),
    "certificate without key": (
        kubeconfig(user={"client-certificate-data": b64(CERT)}),
        None,
        "needs both its certificate and key",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_broken_kubeconfig_says_what_is_wrong(case: str, tmp_path: Path) -> None:
    document, context, message = BAD[case]
    with pytest.raises(KubeConfigError) as caught:
        load_kubeconfig(write_tree(tmp_path, document), context)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_kubeconfig_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="No such file"):
        load_kubeconfig(tmp_path / "none")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"KUBECONFIG": "/a/config:/b/config"}, Path("/a/config")),
        ({"KUBECONFIG": ""}, Path.home() / ".kube" / "config"),
        ({}, Path.home() / ".kube" / "config"),
    ],
)
def test_the_default_kubeconfig(environ: dict[str, str], expected: Path) -> None:
    assert default_kubeconfig(environ) == expected


# --- in cluster --------------------------------------------------------------------------------------


def account(directory: Path, token: str | None = "t0k", ca: bytes | None = CA) -> Path:
    if token is not None:
        (directory / "token").write_text(token + "\n")
    if ca is not None:
        (directory / "ca.crt").write_bytes(ca)
    return directory


SERVICE = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.mark.parametrize(
    ("host", "server"),
    [("10.96.0.1", "https://10.96.0.1:443"), ("fd00:10:96::1", "https://[fd00:10:96::1]:443")],
)
def test_in_cluster_uses_the_service_address_token_file_and_ca(
    host: str, server: str, tmp_path: Path
) -> None:
    config = in_cluster_config({**SERVICE, "KUBERNETES_SERVICE_HOST": host}, account(tmp_path))
    assert config == ClusterConfig(server, ca_pem=CA, token_file=tmp_path / "token")


IN_CLUSTER_BAD: dict[str, tuple[dict[str, str], dict[str, Any], str]] = {
    "outside a pod": ({}, {}, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"),
    "no port": ({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, {}, "are not set"),
    "port not a number": ({**SERVICE, "KUBERNETES_SERVICE_PORT": "https"}, {}, "is not a port number"),
    "no token": (SERVICE, {"token": None}, "service account token"),
    "empty token": (SERVICE, {"token": " "}, "is empty"),
    "no CA": (SERVICE, {"ca": None}, "service account CA"),
}


@pytest.mark.parametrize("case", sorted(IN_CLUSTER_BAD))
def test_in_cluster_errors(case: str, tmp_path: Path) -> None:
    environ, files, message = IN_CLUSTER_BAD[case]
    with pytest.raises(KubeConfigError) as caught:
        in_cluster_config(environ, account(tmp_path, **files))
    assert message in str(caught.value)
