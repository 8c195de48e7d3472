"""Unix-socket chores of a kubelet start and stop: directory cleanup and bounded gRPC server lifecycles."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

log = logging.getLogger(__name__)

SERVER_STOP_TIMEOUT = 2.0
MAX_SOCKET_PATH = 107
"""sun_path is 108 bytes including the terminating NUL."""


def remove_sockets(directory: Path) -> list[Path]:
    """Kubelet's CleanupPluginDirectory: unlink every socket directly in ``directory``, keep the rest.

    Plugins watch for exactly this (their own socket disappearing) to notice a kubelet restart.
    """
    removed = []
    for entry in sorted(directory.iterdir()):
        try:
            mode = os.stat(entry).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
                removed.append(entry)
    return removed


def unlink_socket(path: Path) -> None:
    """Remove ``path`` if it is a socket (never a regular file someone put there)."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()


class UnixServer:
    """A sync gRPC server on ``unix:path`` that owns its thread pool, so stopping it frees the threads."""

    def __init__(self, path: Path, add_services: Callable[[grpc.Server], None], workers: int) -> None:
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ValueError(f"unix socket path longer than {MAX_SOCKET_PATH} bytes: {path}")
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"kubeletsim-{path.name}")
        self._server = grpc.server(self._executor)
        add_services(self._server)
        self._server.add_insecure_port(f"unix:{path}")
        self._server.start()
        self._inode = os.stat(path).st_ino

    def stop(self, timeout: float = SERVER_STOP_TIMEOUT) -> None:
        """Cancel in-flight calls at once, wait (bounded) for the server, release the pool, unlink.

        The socket file is removed only if it is still the one this server bound, so stopping an old
        simulator never deletes the socket of a newer one on the same path.
        """
        if not self._server.stop(grace=None).wait(timeout):
            log.warning("gRPC server on %s did not stop within %.1fs", self.path, timeout)
        self._executor.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:
                unlink_socket(self.path)
