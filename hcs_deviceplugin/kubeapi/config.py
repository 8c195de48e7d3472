"""Where the apiserver is and who we are to it: the pod's service account, or a kubeconfig file.

Both loaders read every file they name now, so that a wrong path or a broken certificate is a
:class:`KubeConfigError` at start-up (the CLI prints it in one line and exits 2), never a failure
on the first request minutes later. The one file read again later is a token file (see
:mod:`.tokens`).

Of a kubeconfig we take what a daemon's kubeconfig holds: the context (current or named), its
cluster's ``server``, ``certificate-authority(-data)``, ``insecure-skip-tls-verify`` and
``tls-server-name``, and its user's ``token``, ``tokenFile`` and ``client-certificate(-data)`` /
``client-key(-data)``. Relative paths are relative to the kubeconfig's directory, as kubectl has
it. What we do not do is refused by name rather than ignored: ``exec`` and ``auth-provider``
credential plugins, ``username``/``password``, ``proxy-url``, and impersonation. Only one file is
read (``$KUBECONFIG`` lists are not merged: its first entry is used).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "ClusterConfig",
    "KubeConfigError",
    "default_kubeconfig",
    "in_cluster_config",
    "load_kubeconfig",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

_UNSUPPORTED_USER_FIELDS = {
    "exec": "exec credential plugins",
    "auth-provider": "auth-provider plugins",
    "username": "basic auth (username/password)",
    "password": "basic auth (username/password)",
    "as": "impersonation",
    "as-groups": "impersonation",
    "as-uid": "impersonation",
}


class KubeConfigError(Exception):
    """No usable API configuration: the message says which file or field is at fault."""


@dataclass(frozen=True)
class ClusterConfig:
    """Everything the client needs, already read from disk (but the token file, read per request).

    ``server`` is a URL (``https://host:port``, an IPv6 host in brackets, optionally a path prefix);
    the PEM fields are bytes; ``token_file`` wins over ``token`` when both are set, as in client-go.
    """

    server: str
    ca_pem: bytes = b""
    client_cert_pem: bytes = b""
    client_key_pem: bytes = b""
    token: str = ""
    token_file: Path | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str = ""


def _url_host(host: str) -> str:
    """A host as it goes into a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def in_cluster_config(
    environ: Mapping[str, str] | None = None, account_dir: Path = SERVICE_ACCOUNT_DIR
) -> ClusterConfig:
    """The pod's own service account: ``KUBERNETES_SERVICE_HOST``/``_PORT``, token and CA files."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "").strip()
    port = env.get("KUBERNETES_SERVICE_PORT", "").strip()
    if not host or not port:
        raise KubeConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
    if not port.isdigit():
        raise KubeConfigError(f"KUBERNETES_SERVICE_PORT={port!r} is not a port number")
    token_path = account_dir / "token"
    ca_path = account_dir / "ca.crt"
    try:
        token = token_path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise KubeConfigError(f"service account token {token_path}: {exc.strerror or exc}") from None
    if not token:
        raise KubeConfigError(f"service account token {token_path} is empty")
    ca_pem = _read(ca_path, "service account CA")
    return ClusterConfig(server=f"https://{_url_host(host)}:{port}", ca_pem=ca_pem, token_file=token_path)


def default_kubeconfig(environ: Mapping[str, str] | None = None) -> Path:
    """``$KUBECONFIG``'s first entry, else ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    first = next((p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p), "")
    return Path(first) if first else Path.home() / ".kube" / "config"


def load_kubeconfig(path: Path, context: str | None = None) -> ClusterConfig:
    """The cluster and user of ``context`` (default: ``current-context``) in the kubeconfig ``path``."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KubeConfigError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise KubeConfigError(f"{path}: not UTF-8 text") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeConfigError(f"Invalid kube-config file: not YAML ({' '.join(str(exc).split())})") from None
    if not document:
        raise KubeConfigError("Invalid kube-config file. No configuration found.")
    if not isinstance(document, Mapping):
        raise KubeConfigError(f"Invalid kube-config file: a {type(document).__name__}, not a mapping")
    name = context or document.get("current-context")
    if not name:
        raise KubeConfigError("Invalid kube-config file: no current-context (and no context named)")
    ctx = _named(document, "contexts", "context", str(name))
    cluster_name = ctx.get("cluster")
    if not cluster_name:
        raise KubeConfigError(f"context {name!r} names no cluster")
    cluster = _named(document, "clusters", "cluster", str(cluster_name))
    user_name = ctx.get("user")
    user = _named(document, "users", "user", str(user_name)) if user_name else {}
    return _cluster_config(path.parent, str(cluster_name), cluster, str(user_name or ""), user)


def _named(document: Mapping[str, Any], section: str, field: str, name: str) -> Mapping[str, Any]:
    """The ``field`` mapping of the entry called ``name`` in ``document[section]``."""
    entries = document.get(section) or []
    if not isinstance(entries, list):
        raise KubeConfigError(f"Invalid kube-config file: {section} is not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(field) or {}
            if not isinstance(value, Mapping):
                raise KubeConfigError(f"{field} {name!r}: not a mapping")
            return value
    raise KubeConfigError(f"Invalid kube-config file: no {field} named {name!r}")


def _cluster_config(
    base: Path, cluster_name: str, cluster: Mapping[str, Any], user_name: str, user: Mapping[str, Any]
) -> ClusterConfig:
    server = str(cluster.get("server") or "").strip()
    if not server:
        raise KubeConfigError(f"cluster {cluster_name!r} has no server")
    if not server.startswith(("https://", "http://")):
        raise KubeConfigError(f"cluster {cluster_name!r}: server {server!r} is not an http(s) URL")
    if cluster.get("proxy-url"):
        raise KubeConfigError(f"cluster {cluster_name!r}: proxy-url is not supported")
    for field, what in _UNSUPPORTED_USER_FIELDS.items():
        if user.get(field):
            raise KubeConfigError(
                f"user {user_name!r}: {what} not supported; give a token or a client certificate"
            )
    where = f"cluster {cluster_name!r}"
    ca_pem = _pem(base, cluster, "certificate-authority", where)
    cert = _pem(base, user, "client-certificate", f"user {user_name!r}")
    key = _pem(base, user, "client-key", f"user {user_name!r}")
    if bool(cert) != bool(key):
        raise KubeConfigError(f"user {user_name!r}: a client certificate needs both its certificate and key")
    token_file = user.get("tokenFile")
    return ClusterConfig(
        server=server,
        ca_pem=ca_pem,
        client_cert_pem=cert,
        client_key_pem=key,
        token=str(user.get("token") or ""),
        token_file=(base / str(token_file)) if token_file else None,
        insecure_skip_tls_verify=cluster.get("insecure-skip-tls-verify") is True,
        tls_server_name=str(cluster.get("tls-server-name") or ""),
    )


def _pem(base: Path, section: Mapping[str, Any], field: str, where: str) -> bytes:
    """``field-data`` (base64) or the file ``field`` names; the inline data wins, as in client-go."""
    data = section.get(f"{field}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError):
            raise KubeConfigError(f"{where}: {field}-data is not base64") from None
    path = section.get(field)
    return _read(base / str(path), f"{where}: {field}") if path else b""


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KubeConfigError(f"{what} {path}: {exc.strerror or exc}") from None
