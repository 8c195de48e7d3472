"""A certificate authority and the certificates it signs, made with the ``openssl`` CLI for a test run.

The server certificate names ``localhost``, ``kubernetes.default.svc`` and ``::1`` but not
``127.0.0.1``: a client that reaches the server as ``127.0.0.1`` must be refused unless it is told
the name to check (``tls-server-name``), which is what makes that setting testable. Keys are P-256,
made in milliseconds.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER_NAMES = "DNS:localhost,DNS:kubernetes.default.svc,IP:::1"
CLIENT_NAME = "system:serviceaccount:hcs:daemon"


@dataclass(frozen=True)
class Pki:
    """Paths of PEM files: a CA, a server certificate it signed, a client certificate it signed,
    and a client certificate from another CA (refused by the server)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)


def _key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path))


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    _key(key)
    _openssl(
        "req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    return cert, key


def _signed(directory: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (directory / f"{name}.{s}" for s in ("crt", "key", "csr", "ext"))
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-extfile", str(ext),
    )  # fmt: skip
    return cert, key


def make_pki(directory: Path) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is needed to make test certificates")
    ca = _ca(directory, "test-ca")
    server = _signed(
        directory, "apiserver", ca, f"subjectAltName={SERVER_NAMES}\nextendedKeyUsage=serverAuth\n"
    )
    client = _signed(directory, CLIENT_NAME, ca, "extendedKeyUsage=clientAuth\n")
    other_ca = _ca(directory, "other-ca")
    stranger = _signed(directory, "stranger", other_ca, "extendedKeyUsage=clientAuth\n")
    return Pki(ca[0], *server, *client, *stranger)
