"""Noticing kubelet restarts and removal of our sockets in the device-plugins directory.

Kubelet, when it starts, removes every socket in the directory and re-creates ``kubelet.sock``
(KUBELET.md §2). We watch the directory with inotify and, on every event and at least once a second
as a fallback, compare the identity (inode and change time) of ``kubelet.sock`` with the last one
seen: inode numbers alone can be reused at once by the file system, the pair cannot. Events only
wake the check, so a missed or coalesced event cannot hide a restart.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from hcs_deviceplugin.fswatch import DirectoryWatcher, FsEvent

log = logging.getLogger(__name__)

FileIdentity = tuple[int, int, int]


def file_identity(path: Path) -> FileIdentity | None:
    """(device, inode, ctime ns) of ``path``, or None if it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


class KubeletWatcher:
    """Calls ``on_restart`` when ``kubelet.sock`` is (re)created and ``on_tick`` after every check.

    ``on_tick`` lets the daemon verify that its own sockets still exist (a removed socket means
    kubelet or an operator cleaned the directory), on the same cadence and thread.
    """

    def __init__(
        self,
        plugin_dir: Path,
        on_restart: Callable[[], None],
        on_tick: Callable[[], None] | None = None,
        kubelet_socket_name: str = "kubelet.sock",
    ) -> None:
        self.kubelet_socket = plugin_dir / kubelet_socket_name
        self._on_restart = on_restart
        self._on_tick = on_tick
        self._seen = file_identity(self.kubelet_socket)
        self._watcher = DirectoryWatcher(plugin_dir, self._on_events, name="kubelet-watch")

    def start(self) -> None:
        self._seen = file_identity(self.kubelet_socket)
        self._watcher.start()

    def stop(self) -> None:
        self._watcher.stop()

    def _on_events(self, events: list[FsEvent]) -> None:
        current = file_identity(self.kubelet_socket)
        if current is not None and current != self._seen:
            log.info("kubelet.sock (re)created: kubelet restarted; re-registering every pool")
            self._seen = current
            self._on_restart()
        elif current is None and self._seen is not None:
            log.info("kubelet.sock removed: kubelet stopped")
            self._seen = None
        if self._on_tick is not None:
            self._on_tick()
