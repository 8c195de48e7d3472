"""Directory watching with Linux inotify through ctypes, with a bounded periodic fallback.

Used for two things: noticing that kubelet recreated ``kubelet.sock`` (or removed our socket), and
noticing that a mounted ConfigMap changed (kubelet swaps a ``..data`` symlink atomically, so we watch
the directory, never the file; a ConfigMap mounted in a sub-directory swaps *its own* ``..data``,
so the pools source also watches those sub-directories). Inotify gives sub-millisecond latency;
where it is unavailable (``inotify_init1`` fails, e.g. exhausted instances) :class:`DirectoryWatcher`
still wakes at least every ``fallback_interval`` seconds (at most 1 s) so callers can re-check.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import select
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.fieldrepr import field_repr

log = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

DIRECTORY_EVENTS = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)

_EVENT_HEADER = struct.Struct("iIII")


# Made and read within one read of the watch and its callback, on the watcher's thread: not
# frozen, so a start compiles no __setattr__ or __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class FsEvent:
    """One inotify event: the name inside the watched directory ("" for the directory itself)."""

    name: str
    mask: int

    @property
    def created(self) -> bool:
        return bool(self.mask & (IN_CREATE | IN_MOVED_TO))

    @property
    def removed(self) -> bool:
        return bool(self.mask & (IN_DELETE | IN_MOVED_FROM))

    @property
    def overflow(self) -> bool:
        return bool(self.mask & IN_Q_OVERFLOW)


def _load_libc() -> ctypes.CDLL | None:
    """glibc by its soname first; only elsewhere ``find_library``, which runs ``ldconfig -p`` (a
    subprocess at import time, and ctypes.util's own imports) to find what glibc names directly."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        from ctypes.util import find_library

        name = find_library("c")
        if name is None:
            return None
        try:
            libc = ctypes.CDLL(name, use_errno=True)
        except OSError:
            return None
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_init1.restype = ctypes.c_int
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_add_watch.restype = ctypes.c_int
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.inotify_rm_watch.restype = ctypes.c_int
    return libc


_LIBC = _load_libc()


def open_inotify(what: Path) -> int:
    """A non-blocking inotify descriptor, or -1 (logged) when the kernel or libc refuses one.

    ``what`` only names the directory in the log line: callers then fall back to re-checking.
    """
    if _LIBC is None:
        log.warning("libc not loadable; watching %s by periodic re-check only", what)
        return -1
    fd = int(_LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        log.warning(
            "inotify_init1 failed (%s); watching %s by periodic re-check only",
            errno.errorcode.get(err, err),
            what,
        )
    return fd


def add_watch(fd: int, path: Path, mask: int) -> tuple[int, int]:
    """(watch descriptor, 0) or (-1, errno) for ``path`` on inotify ``fd``."""
    if _LIBC is None or fd < 0:
        return (-1, errno.ENOSYS)
    wd = int(_LIBC.inotify_add_watch(fd, os.fsencode(path), mask))
    return (wd, 0) if wd >= 0 else (-1, ctypes.get_errno())


def remove_watch(fd: int, wd: int) -> None:
    """Drop a watch; harmless if the kernel already dropped it (directory removed)."""
    if _LIBC is not None and fd >= 0:
        _LIBC.inotify_rm_watch(fd, wd)


def read_raw_events(fd: int) -> list[tuple[int, int, str]]:
    """Every pending event on non-blocking ``fd`` as (watch descriptor, mask, name)."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return []
    events: list[tuple[int, int, str]] = []
    offset = 0
    while offset + _EVENT_HEADER.size <= len(data):
        wd, mask, _cookie, length = _EVENT_HEADER.unpack_from(data, offset)
        offset += _EVENT_HEADER.size
        name = data[offset : offset + length].rstrip(b"\0").decode(errors="replace")
        offset += length
        events.append((wd, mask, name))
    return events


class DirectoryWatcher:
    """Calls ``on_events`` from its own thread when something changes in ``directory`` or in one of
    the sub-directories the caller asked for (:meth:`watch_subdirectories`).

    ``on_events`` receives the batch read at once; events in a sub-directory are named relative to
    ``directory`` (``team-a/..data``). It is also called with no events every ``fallback_interval``
    seconds (at most 1 s), so callers re-check even without inotify or after lost events. The
    directory is created if missing and re-watched if it is deleted and created again. All watches
    share one inotify instance: instances are few (``fs.inotify.max_user_instances`` is often 128 for
    the whole node), so a sub-directory per mounted ConfigMap must not cost one each.
    """

    def __init__(
        self,
        directory: Path,
        on_events: Callable[[list[FsEvent]], None],
        fallback_interval: float = 1.0,
        name: str = "fswatch",
    ) -> None:
        self.directory = directory
        self._on_events = on_events
        self._fallback_interval = min(max(fallback_interval, 0.05), 1.0)
        self._stop = threading.Event()
        # Written to by stop() so the select() returns at once: a shutdown must not wait out
        # the fallback interval (SIGTERM has to be served in milliseconds).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._fd = -1
        self._root_wd = -1
        self._by_name: dict[str, int] = {}
        self._by_wd: dict[int, str] = {}
        self.inotify_available = False

    def start(self) -> None:
        """Create ``directory`` if needed, watch it, start the thread; OSError if it cannot be made."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        try:
            if self._wake_w >= 0:
                os.write(self._wake_w, b"x")
        except OSError:
            pass  # already closed or full: the thread is awake anyway
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._by_name.clear()
            self._by_wd.clear()
        if not self._thread.is_alive() and self._wake_r >= 0:
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1

    def watch_subdirectories(self, names: Iterable[str]) -> None:
        """Watch exactly these sub-directories of ``directory`` (by name) from now on."""
        wanted = set(names)
        with self._lock:
            if self._fd < 0:
                return
            for name in sorted(self._by_name.keys() - wanted):
                wd = self._by_name.pop(name)
                if self._by_wd.get(wd) == name:
                    del self._by_wd[wd]
                    remove_watch(self._fd, wd)
            for name in sorted(wanted - self._by_name.keys()):
                wd, err = add_watch(self._fd, self.directory / name, DIRECTORY_EVENTS | IN_ONLYDIR)
                if wd < 0:
                    if err not in (errno.ENOENT, errno.ENOTDIR):  # gone again: the next listing says so
                        log.warning(
                            "inotify_add_watch(%s) failed: %s", self.directory / name, os.strerror(err)
                        )
                    continue
                self._by_name[name] = wd
                self._by_wd[wd] = name

    def watched_subdirectories(self) -> set[str]:
        with self._lock:
            return set(self._by_name)

    def _open(self) -> None:
        self._fd = open_inotify(self.directory)
        self._watch_root()

    def _watch_root(self) -> None:
        if self._fd < 0:
            return
        wd, err = add_watch(self._fd, self.directory, DIRECTORY_EVENTS)
        if wd < 0:
            log.warning("inotify_add_watch(%s) failed: %s", self.directory, os.strerror(err))
            self.inotify_available = False
            return
        self._root_wd = wd
        self.inotify_available = True

    def _read_events(self) -> list[FsEvent]:
        events: list[FsEvent] = []
        root_gone = False
        for wd, mask, name in read_raw_events(self._fd):
            if wd == self._root_wd:
                root_gone = root_gone or bool(mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
                events.append(FsEvent(name, mask))
                continue
            subdirectory = self._by_wd.get(wd)
            if subdirectory is None:
                continue  # a watch we already dropped
            if mask & IN_IGNORED:  # the kernel removed the watch: the sub-directory is gone
                del self._by_wd[wd]
                self._by_name.pop(subdirectory, None)
            events.append(FsEvent(f"{subdirectory}/{name}" if name else subdirectory, mask))
        if root_gone:
            # The directory itself went away (kubelet re-creates volume directories): re-arm.
            self.directory.mkdir(parents=True, exist_ok=True)
            self._watch_root()
        return events

    def _run(self) -> None:
        while not self._stop.is_set():
            events: list[FsEvent] = []
            if self._fd >= 0:
                ready, _, _ = select.select([self._fd, self._wake_r], [], [], self._fallback_interval)
                if self._fd in ready:
                    with self._lock:
                        if self._fd >= 0:
                            events = self._read_events()
            else:
                self._stop.wait(self._fallback_interval)
            if self._stop.is_set():
                return
            try:
                self._on_events(events)
            except Exception:
                log.exception("directory watch callback failed for %s", self.directory)
