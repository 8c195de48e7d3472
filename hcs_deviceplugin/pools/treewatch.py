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

import errno
import logging
import os
import select
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from hcs_deviceplugin.fswatch import (
    DIRECTORY_EVENTS,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    FsEvent,
    add_watch,
    open_inotify,
    read_raw_events,
    remove_watch,
)

log = logging.getLogger(__name__)

_IN_ONLYDIR = 0x01000000


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
            if self._fd < 0:
                return
            for name in sorted(self._by_name.keys() - wanted):
                wd = self._by_name.pop(name)
                if self._by_wd.get(wd) == name:
                    del self._by_wd[wd]
                    remove_watch(self._fd, wd)
            for name in sorted(wanted - self._by_name.keys()):
                wd, err = add_watch(self._fd, self.root / name, DIRECTORY_EVENTS | _IN_ONLYDIR)
                if wd < 0:
                    if err not in (errno.ENOENT, errno.ENOTDIR):  # gone again: the next listing says so
                        log.warning("inotify_add_watch(%s) failed: %s", self.root / name, os.strerror(err))
                    continue
                self._by_name[name] = wd
                self._by_wd[wd] = name

    def watched_subdirectories(self) -> set[str]:
        with self._lock:
            return set(self._by_name)

    def _open(self) -> None:
        self._fd = open_inotify(self.root)
        self._watch_root()

    def _watch_root(self) -> None:
        if self._fd < 0:
            return
        wd, err = add_watch(self._fd, self.root, DIRECTORY_EVENTS)
        if wd < 0:
            log.warning("inotify_add_watch(%s) failed: %s", self.root, os.strerror(err))
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
