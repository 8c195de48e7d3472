"""Pools from a directory of mounted ConfigMaps (POOLS.md, "Where the ConfigMaps come from": mounted files).

The default source: it needs no API access. What it reads is laid out in :mod:`.mounted`: top-level
pool files (each an object of its own) and one sub-directory per mounted ConfigMap. Kubelet updates a
ConfigMap volume by an atomic swap of its ``..data`` symlink, so directories (never files) are
watched — the root and every sub-directory, through one inotify instance
(:class:`~hcs_deviceplugin.fswatch.DirectoryWatcher`) — and
every change triggers a re-read of the whole tree, which is cheap: objects whose content did not
change are not parsed again.

Everything read goes to a :class:`~hcs_deviceplugin.pools.aggregate.PoolAggregator` as the complete
set of this source (``source="file"``), which parses each object on its own, keeps each one's last
good version, merges, and notifies only on a real change. The aggregator is this source's own unless
one is passed in to share with the API source.

When something cannot be read the last thing read stands: a directory that cannot be listed keeps
every object, an unreadable file or sub-directory keeps its previous content (and its error is
reported; so is a file that is not a regular file, or is over the size limit, see :mod:`.files`), and
a file being written in place is not read until it is closed or has been quiet for
``write_settle`` seconds.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hcs_deviceplugin.fswatch import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_MODIFY,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    DirectoryWatcher,
    FsEvent,
)
from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.aggregate import OnChange, PoolAggregator
from hcs_deviceplugin.pools.errors import ConfigError
from hcs_deviceplugin.pools.mounted import (
    Listing,
    ReadError,
    is_pool_file_name,
    list_mounted,
    read_configmap_directory,
    read_file_object,
)
from hcs_deviceplugin.pools.objects import ConfigMapObject

log = logging.getLogger(__name__)

__all__ = ["DIRECTORY_PATH", "WRITE_SETTLE_SECONDS", "DirectoryPoolSource", "is_pool_file_name"]

DIRECTORY_PATH = "<directory>"
"""Field path of errors about the directory itself (it cannot be listed)."""

WRITE_SETTLE_SECONDS = 2.0
"""How long a file that is being written in place (modified, not yet closed) is left alone."""

SOURCE_NAME = "file"

_Reader = Callable[[Path, str, str], ConfigMapObject]


class DirectoryPoolSource:
    """Keeps a :class:`PoolSet` in step with the ConfigMaps mounted in ``directory``.

    ``on_change(pools, errors)`` is called after :meth:`start`, from the watcher thread, whenever the
    merged PoolSet or the error list differs from what was last reported or returned; never for
    identical content. :meth:`reload` re-reads synchronously and returns the result instead of calling
    ``on_change`` (the caller has it already), so the usual start-up is ``pools, errors =
    source.reload()``, act on it, ``source.start()``.

    Give ``aggregator`` instead of ``on_change`` to share one aggregator (and its ``on_change``) with
    other sources; ``namespace`` is then the namespace the mounted ConfigMaps come from, so that a
    sub-directory and the API's copy of the same ConfigMap are recognised as one object.

    A pool name defined in two objects is an error reported against the object later in sorted
    order; that object's definition is dropped, the earlier one is served, and the later object's
    other pools still apply.

    ``on_reload()`` is called after each re-read that a change caused (an inotify event, or
    :meth:`reload`), for ``hcs_config_reloads_total{source="file"}``; not for the first read at
    :meth:`start`, which is a load, not a reload. The polling fallback's timed re-reads call it only
    when the directory's content changed, so the counter keeps meaning "the config was re-read
    because it changed", not "seconds without inotify".
    """

    def __init__(
        self,
        directory: Path,
        on_change: OnChange | None = None,
        *,
        aggregator: PoolAggregator | None = None,
        namespace: str = "",
        fallback_interval: float = 1.0,
        write_settle: float = WRITE_SETTLE_SECONDS,
        on_reload: Callable[[], None] | None = None,
    ) -> None:
        if aggregator is None:
            if on_change is None:
                raise ValueError("give on_change, or an aggregator to share")
            aggregator = PoolAggregator(on_change)
        elif on_change is not None:
            raise ValueError("give on_change or an aggregator, not both: the aggregator's on_change reports")
        self.directory = directory
        self.aggregator = aggregator
        self.namespace = namespace
        self._on_reload = on_reload
        self._fallback_interval = fallback_interval
        self._write_settle = write_settle
        # One lock serialises reloads, so the aggregator sees this source's states in order.
        self._lock = threading.RLock()
        self._objects: dict[str, ConfigMapObject] = {}
        self._read_errors: dict[str, ConfigError] = {}
        self._writing: dict[str, float] = {}
        self._directory_error: ConfigError | None = None
        self._missing = False
        self._stop = threading.Event()
        self._watcher: DirectoryWatcher | None = None
        self._poller: threading.Thread | None = None

    @property
    def current(self) -> PoolSet:
        """The merged PoolSet as last reported (each object's last good version)."""
        return self.aggregator.current

    @property
    def errors(self) -> list[ConfigError]:
        """The errors as last reported: the directory's, then per object, then pools defined twice."""
        return self.aggregator.errors

    def start(self) -> None:
        """Watch the directory; then report the current state through ``on_change`` if it changed.

        Without inotify (or if the directory cannot even be created for the watch) the directory is
        re-read every ``fallback_interval`` seconds instead.
        """
        with self._lock:
            if self._watcher is not None or self._poller is not None:
                raise RuntimeError(f"pool source for {self.directory} already started")
            self._stop.clear()
            watcher = DirectoryWatcher(
                self.directory, self._on_events, fallback_interval=self._fallback_interval, name="pools-dir"
            )
            try:
                watcher.start()
                self._watcher = watcher
            except OSError as exc:
                log.warning(
                    "cannot watch pool directory %s (%s); re-reading it every %.1f s",
                    self.directory,
                    exc,
                    self._fallback_interval,
                )
                self._poller = threading.Thread(target=self._poll, name="pools-dir-poll", daemon=True)
                self._poller.start()
            self._refresh(notify=True, counted=False)

    def stop(self) -> None:
        """Stop watching; idempotent. ``current`` and ``errors`` keep their last values."""
        self._stop.set()
        watcher, poller = self._watcher, self._poller
        self._watcher = self._poller = None
        if watcher is not None:
            watcher.stop()
        if poller is not None and poller is not threading.current_thread():
            poller.join(timeout=5)

    def reload(self) -> tuple[PoolSet, list[ConfigError]]:
        """Re-read the directory now and return the merged PoolSet and all errors.

        Does not call ``on_change``: the caller gets the result. Unchanged objects are not re-parsed.
        """
        return self._refresh(notify=False)

    def _poll(self) -> None:
        while not self._stop.wait(self._fallback_interval):
            try:
                with self._lock:
                    before = (dict(self._objects), dict(self._read_errors), self._directory_error)
                    self._refresh(notify=True, counted=False)
                    if (self._objects, self._read_errors, self._directory_error) != before:
                        self._reloaded()
            except Exception:
                log.exception("re-reading pool directory %s failed", self.directory)

    def _on_events(self, events: list[FsEvent]) -> None:
        now = time.monotonic()
        with self._lock:
            for event in events:
                self._track_write(event, now)
            self._refresh(notify=True)

    def _track_write(self, event: FsEvent, now: float) -> None:
        """Remember files written in place, so a half-written file is not read (and reported) as broken.

        Kubelet never does this (its swap is atomic), but people and tools editing the directory do.
        A ``modify`` marks the file, ``close-write`` (or a rename or delete) releases it; a mark older
        than ``write_settle`` is ignored, so a writer that keeps the file open cannot stall us. Names
        are relative to the directory (``team-a/config.yaml`` inside a ConfigMap sub-directory).
        """
        if event.overflow:
            self._writing.clear()
            return
        parent, _, leaf = event.name.rpartition("/")
        if not leaf or leaf.startswith(".") or (not parent and not is_pool_file_name(leaf)):
            return
        if event.mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE):
            self._writing.pop(event.name, None)
        elif event.mask & IN_MODIFY or (event.mask & IN_CREATE and _is_regular(self.directory / event.name)):
            # Only a regular file can be half written: a FIFO, socket, directory or link created
            # under a pool file's name is final at once, and refused at once.
            self._writing[event.name] = now

    def _refresh(self, notify: bool, counted: bool = True) -> tuple[PoolSet, list[ConfigError]]:
        with self._lock:
            self._scan()
            errors = [self._directory_error] if self._directory_error else []
            errors += [self._read_errors[name] for name in sorted(self._read_errors)]
            objects = [self._objects[name] for name in sorted(self._objects)]
            result = self.aggregator.update(SOURCE_NAME, objects, errors=errors, notify=notify)
            if counted:
                self._reloaded()
            return result

    def _reloaded(self) -> None:
        if self._on_reload is None:
            return
        try:
            self._on_reload()
        except Exception:
            log.exception("on_reload of pool directory %s failed", self.directory)

    def _scan(self) -> None:
        listing = self._list()
        if listing is None:
            return  # cannot list: keep every object's last state rather than drop all pools
        if self._watcher is not None:
            self._watcher.watch_subdirectories(listing.configmaps)
        present = set(listing.files) | set(listing.configmaps)
        for gone in (self._objects.keys() | self._read_errors.keys()) - present:
            self._objects.pop(gone, None)
            self._read_errors.pop(gone, None)
        now = time.monotonic()
        for path, since in list(self._writing.items()):
            if now - since >= self._write_settle:
                del self._writing[path]
        busy = {path.partition("/")[0] for path in self._writing}
        for name in listing.files:
            if name not in busy:
                self._read(name, read_file_object)
        for name in listing.configmaps:
            if name not in busy:
                self._read(name, read_configmap_directory)

    def _list(self) -> Listing | None:
        try:
            listing = list_mounted(self.directory)
        except FileNotFoundError:
            if os.path.islink(self.directory):
                # A link to nowhere is a broken mount or a mistake, not an absent directory: keep all.
                target = _target(self.directory)
                self._directory_error = ConfigError(
                    str(self.directory), DIRECTORY_PATH, f"is a dangling symlink (to {target!r})"
                )
                return None
            if not self._missing:
                log.warning("pool directory %s does not exist: no pools", self.directory)
            self._missing = True
            self._directory_error = None
            return Listing()
        except OSError as exc:
            self._directory_error = ConfigError(
                str(self.directory), DIRECTORY_PATH, f"cannot list: {exc.strerror or exc}"
            )
            return None
        if self._missing:
            log.info("pool directory %s exists now", self.directory)
        self._missing = False
        self._directory_error = None
        return listing

    def _read(self, name: str, reader: _Reader) -> None:
        try:
            obj = reader(self.directory, name, self.namespace)
        except FileNotFoundError:
            self._objects.pop(name, None)  # gone since the listing: as if never listed
            self._read_errors.pop(name, None)
        except ReadError as exc:
            self._read_errors[name] = exc.error  # the previous object, if any, stays
        else:
            self._objects[name] = obj
            self._read_errors.pop(name, None)


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
