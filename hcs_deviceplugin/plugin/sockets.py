"""Plugin socket names and the care needed before binding one.

gRPC core unlinks an existing unix socket path itself when it binds, so a second daemon instance
would silently steal the first one's socket. We therefore probe first: a path that accepts a
connection belongs to a live server and is refused; a path that refuses is stale and removed, and
so is a regular file or link squatting on our socket name. A directory there is refused.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
from pathlib import Path

log = logging.getLogger(__name__)

SOCKET_PREFIX = "hcs-"
MAX_UNIX_PATH = 107  # sun_path is 108 bytes including the terminating NUL


class SocketInUseError(RuntimeError):
    """Another live server answers on the socket path we were about to bind."""


def socket_name_for(resource_name: str) -> str:
    """A unique, predictable socket file name for a resource: ``hcs-<prefix>_<pool>.sock``.

    Resource names are unique per node and map one-to-one onto these names ("/" is the only
    character not allowed in a file name and it cannot appear twice in a valid resource name).
    Very long names are shortened with a digest so the full path stays within ``sun_path``.
    """
    name = SOCKET_PREFIX + resource_name.replace("/", "_") + ".sock"
    if len(name) > 80:
        import hashlib  # here: it loads OpenSSL, about 5 ms of a start that seldom needs it

        digest = hashlib.sha256(resource_name.encode()).hexdigest()[:16]
        name = f"{SOCKET_PREFIX}{resource_name.rsplit('/', 1)[-1][:50]}-{digest}.sock"
    return name


def is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def socket_answers(path: Path, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(os.fspath(path))
        except OSError:
            return False
        return True


def prepare_socket_path(path: Path) -> None:
    """Make ``path`` free to bind: refuse a live server, remove a stale socket file."""
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(f"socket path too long for a unix socket ({len(str(path))} bytes): {path}")
    if not path.exists() and not path.is_symlink():
        return
    if not is_socket(path):
        if path.is_dir() and not path.is_symlink():
            raise SocketInUseError(f"{path} is a directory; remove it so the pool can serve")
        # Our own socket name, but a file or link: nothing can be serving there. Left alone it
        # would keep the pool down for good, so it goes (with a warning naming it).
        log.warning("removing %s: a non-socket at our socket path", path)
        path.unlink()
        return
    if socket_answers(path):
        raise SocketInUseError(f"{path} is served by another live process")
    remove_socket(path)


def remove_socket(path: Path) -> None:
    """Remove our socket file if it is still there (kubelet may have removed it already)."""
    try:
        if is_socket(path):
            path.unlink()
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
