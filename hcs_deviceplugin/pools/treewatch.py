"""Watching a directory and its immediate sub-directories with one inotify instance.

The pools directory holds ConfigMaps in two layouts at once: files at the top (one mounted ConfigMap,
or files put there by hand) and one sub-directory per mounted ConfigMap. Kubelet updates each
ConfigMap by swapping the ``..data`` symlink *inside its own directory*, so a watch on the top alone
would miss the update of a sub-directory until the periodic re-check. One watch per sub-directory on
one inotify instance (not one :class:`~hcs_deviceplugin.fswatch.DirectoryWatcher` each) keeps a pool
per ConfigMap from costing a thread and an inotify instance each — instances are few
(``fs.inotify.max_user_instances`` is often 128 for the whole node).

Events name the changed entry relative to the root (``team-a/..data``); like ``DirectoryWatcher``, the
callback also runs every ``fallback_interval`` (≤ 1 s) with no events, so the caller re-checks even
when inotify is unavailable or events were lost. The caller says which sub-directories to watch
(:meth:`TreeWatcher.watch_subdirectories`) after each listing, so watches follow what exists.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from hcs_deviceplugin.fswatch import (
    DIRECTORY_EVENTS,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    FsEvent,
)

log = logging.getLogger(__name__)

_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_ONLYDIR = 0x01000000
_EVENT_HEADER = struct.Struct("iIII")


def _load_libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c") or "libc.so.6"
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


class TreeWatcher:
    """Calls ``on_events`` from its own thread when something changes in ``root`` or a watched
    sub-directory (see the module docstring). ``root`` is created if missing and re-watched if it is
    deleted and created again."""

    def __init__(
        self,
        root: Path,
        on_events: Callable[[list[FsEvent]], None],
        fallback_interval: float = 1.0,
        name: str = "treewatch",
    ) -> None:
        self.root = root
        self._on_events = on_events
        self._fallback_interval = min(max(fallback_interval, 0.05), 1.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._fd = -1
        self._root_wd = -1
        self._by_name: dict[str, int] = {}
        self._by_wd: dict[int, str] = {}
        self.inotify_available = False

    def start(self) -> None:
        """Create ``root`` if needed, watch it, start the thread; OSError if ``root`` cannot be made."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._open()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._by_name.clear()
            self._by_wd.clear()

    def watch_subdirectories(self, names: Iterable[str]) -> None:
        """Watch exactly these sub-directories of ``root`` (by name) from now on."""
        wanted = set(names)
        with self._lock:
            if _LIBC is None or self._fd < 0:
                return
            for name in sorted(self._by_name.keys() - wanted):
                wd = self._by_name.pop(name)
                if self._by_wd.get(wd) == name:
                    del self._by_wd[wd]
                    _LIBC.inotify_rm_watch(self._fd, wd)  # fails harmlessly if the kernel dropped it
            for name in sorted(wanted - self._by_name.keys()):
                path = os.fsencode(self.root / name)
                wd = _LIBC.inotify_add_watch(self._fd, path, DIRECTORY_EVENTS | _IN_ONLYDIR)
                if wd < 0:
                    err = ctypes.get_errno()
                    if err not in (errno.ENOENT, errno.ENOTDIR):  # gone again: the next listing says so
                        log.warning("inotify_add_watch(%s) failed: %s", self.root / name, os.strerror(err))
                    continue
                self._by_name[name] = wd
                self._by_wd[wd] = name

    def watched_subdirectories(self) -> set[str]:
        with self._lock:
            return set(self._by_name)

    def _open(self) -> None:
        if _LIBC is None:
            log.warning("libc not loadable; watching %s by periodic re-check only", self.root)
            return
        fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            log.warning(
                "inotify_init1 failed (%s); watching %s by periodic re-check only",
                errno.errorcode.get(err, err),
                self.root,
            )
            return
        self._fd = fd
        self._watch_root()

    def _watch_root(self) -> None:
        if _LIBC is None or self._fd < 0:
            return
        wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(self.root), DIRECTORY_EVENTS)
        if wd < 0:
            log.warning("inotify_add_watch(%s) failed: %s", self.root, os.strerror(ctypes.get_errno()))
            self.inotify_available = False
            return
        self._root_wd = wd
        self.inotify_available = True

    def _read_events(self) -> list[FsEvent]:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return []
        events: list[FsEvent] = []
        offset = 0
        root_gone = False
        while offset + _EVENT_HEADER.size <= len(data):
            wd, mask, _cookie, length = _EVENT_HEADER.unpack_from(data, offset)
            offset += _EVENT_HEADER.size
            name = data[offset : offset + length].rstrip(b"\0").decode(errors="replace")
            offset += length
            if wd == self._root_wd:
                root_gone = root_gone or bool(mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
                events.append(FsEvent(name, mask))
                continue
            directory = self._by_wd.get(wd)
            if directory is None:
                continue  # a watch we already dropped
            if mask & IN_IGNORED:  # the kernel removed the watch: the sub-directory is gone
                del self._by_wd[wd]
                self._by_name.pop(directory, None)
            events.append(FsEvent(f"{directory}/{name}" if name else directory, mask))
        if root_gone:
            # The root itself went away (kubelet re-creates volume directories): re-arm.
            self.root.mkdir(parents=True, exist_ok=True)
            self._watch_root()
        return events

    def _run(self) -> None:
        while not self._stop.is_set():
            events: list[FsEvent] = []
            if self._fd >= 0:
                ready, _, _ = select.select([self._fd], [], [], self._fallback_interval)
                if ready:
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
                log.exception("directory watch callback failed for %s", self.root)
