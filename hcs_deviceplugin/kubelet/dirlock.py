"""One daemon per kubelet device-plugins directory: an exclusive flock on a file there.

Two instances on one directory (a force-deleted pod whose process still runs, a second release)
would unlink and rebind each other's sockets and register over each other. The second one instead
waits for the lock, saying who holds it, and takes over only when the first has exited: the kernel
releases a flock when its holder dies, even by SIGKILL. Kubelet removes only sockets from the
directory, so the lock file survives kubelet restarts. If the whole directory is removed (and
re-created), the holder notices at its next check and locks the new file, so a later instance
still waits.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".hcs-deviceplugin.lock"


class PluginDirLock:
    """``acquire`` blocks until the lock is ours (or ``stop`` is set); ``release`` gives it back."""

    def __init__(self, plugin_dir: Path, log_every: float = 10.0) -> None:
        self.path = plugin_dir / LOCK_NAME
        self._log_every = log_every
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, stop: threading.Event, poll: float = 0.05, also: threading.Event | None = None) -> bool:
        """Take the lock; False if ``stop`` (or ``also``) was set first. Logs the holder's pid meanwhile."""
        fd = self._open()
        next_log = 0.0
        while not _try_flock(fd):
            now = time.monotonic()
            if now >= next_log:
                log.warning(
                    "another hcs-deviceplugin (pid %s) serves %s; waiting for it to exit",
                    _holder(fd) or "unknown",
                    self.path.parent,
                )
                next_log = now + self._log_every
            if stop.wait(poll) or (also is not None and also.is_set()):
                os.close(fd)
                return False
        self._fd = _claim(fd)
        return True

    def ensure(self) -> None:
        """Re-take the lock if our lock file was removed or replaced (the directory was wiped)."""
        fd = self._fd
        if fd is None:
            return
        try:
            current = os.stat(self.path)
            ours = os.fstat(fd)
            if (current.st_dev, current.st_ino) == (ours.st_dev, ours.st_ino):
                return
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot check the lock file %s: %s", self.path, exc)
            return
        try:
            new = self._open()
        except OSError as exc:
            log.warning("cannot re-create the lock file %s: %s", self.path, exc)
            return
        if not _try_flock(new):
            log.error(
                "lock file %s was replaced and another instance (pid %s) holds it: two daemons serve this "
                "directory",
                self.path,
                _holder(new) or "unknown",
            )
            os.close(new)
            return
        self._fd = _claim(new)
        os.close(fd)
        log.info("lock file %s was removed; locked it again", self.path)

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock; the file stays for the next instance


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _claim(fd: int) -> int:
    """Write our pid into the lock file we now hold, for the next instance's log line."""
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return ""
