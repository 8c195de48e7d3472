"""Pools from a directory of mounted files (POOLS.md, "Where the ConfigMaps come from": mounted files).

The default source: it needs no API access. Kubelet mounts each ConfigMap as a directory and updates
it by an atomic swap of the ``..data`` symlink, so the directory (not a file) is watched, and every
change of it triggers a re-read. Each file is its own source object (POOLS.md, "Applying a change"):
a broken file keeps its last good version while the others apply, so one bad edit cannot take pools
away from the node. Content is compared byte for byte, so the periodic fallback re-read and no-op
rewrites never reach ``on_change``.

Which files count: regular files or symlinks to files, named ``*.yaml``, ``*.yml`` or ``*.json``, not
starting with ``.`` (which skips kubelet's ``..data`` and ``..<timestamp>`` entries and editors' and
our tests' temporary files). Files without one of those suffixes are not read, so a ConfigMap may
carry other keys (a README) next to the pools.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
from hcs_deviceplugin.model import Pool, PoolSet
from hcs_deviceplugin.pools.document import Syntax
from hcs_deviceplugin.pools.errors import FILE_PATH, ConfigError, ConfigErrors
from hcs_deviceplugin.pools.native import parse_native

log = logging.getLogger(__name__)

SUFFIX_SYNTAX: Mapping[str, Syntax] = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
DIRECTORY_PATH = "<directory>"
"""Field path of errors about the directory itself (it cannot be listed)."""

WRITE_SETTLE_SECONDS = 2.0
"""How long a file that is being written in place (modified, not yet closed) is left alone."""

Parser = Callable[[str, str, Syntax], list[Pool]]
OnChange = Callable[[PoolSet, list[ConfigError]], None]


def is_pool_file_name(name: str) -> bool:
    """Whether a directory entry's name makes it a pool file (its type is checked separately)."""
    return not name.startswith(".") and os.path.splitext(name)[1] in SUFFIX_SYNTAX


@dataclass
class _FileState:
    """What one file last contributed: its bytes, its last good pools, its current errors."""

    content: bytes | None = None
    good: tuple[Pool, ...] | None = None
    errors: tuple[ConfigError, ...] = ()


class DirectoryPoolSource:
    """Keeps a :class:`PoolSet` in step with the pool files in ``directory``.

    ``on_change(pools, errors)`` is called after :meth:`start`, from the watcher thread, whenever the
    merged PoolSet or the error list differs from what this source last reported or returned; never
    for identical content. :meth:`reload` re-reads synchronously and returns the result instead of
    calling ``on_change`` (the caller has it already), so the usual start-up is
    ``pools, errors = source.reload()``, act on it, ``source.start()``.

    A pool name defined in two files is an error reported against the file later in sorted order;
    that file's definition is dropped, the earlier file's (last good) definition is served, and the
    later file's other pools still apply.
    """

    def __init__(
        self,
        directory: Path,
        on_change: OnChange,
        *,
        parser: Parser = parse_native,
        fallback_interval: float = 1.0,
        write_settle: float = WRITE_SETTLE_SECONDS,
    ) -> None:
        self.directory = directory
        self._on_change = on_change
        self._parser = parser
        self._fallback_interval = fallback_interval
        self._write_settle = write_settle
        # One lock serialises reloads and notifications, so on_change sees states in order.
        self._lock = threading.RLock()
        self._files: dict[str, _FileState] = {}
        self._writing: dict[str, float] = {}
        self._directory_error: ConfigError | None = None
        self._missing = False
        self._current = PoolSet()
        self._errors: tuple[ConfigError, ...] = ()
        self._stop = threading.Event()
        self._watcher: DirectoryWatcher | None = None
        self._poller: threading.Thread | None = None

    @property
    def current(self) -> PoolSet:
        """The merged PoolSet as last reported (each file's last good version)."""
        return self._current

    @property
    def errors(self) -> list[ConfigError]:
        """The errors as last reported: per-file errors, then pool names defined twice."""
        return list(self._errors)

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
            self._refresh(notify=True)

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

        Does not call ``on_change``: the caller gets the result. Unchanged files are not re-parsed.
        """
        return self._refresh(notify=False)

    def _poll(self) -> None:
        while not self._stop.wait(self._fallback_interval):
            try:
                self._refresh(notify=True)
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
        than ``write_settle`` is ignored, so a writer that keeps the file open cannot stall us.
        """
        if event.overflow:
            self._writing.clear()
            return
        if not is_pool_file_name(event.name):
            return
        if event.mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE):
            self._writing.pop(event.name, None)
        elif event.mask & IN_MODIFY or (
            event.mask & IN_CREATE and not (self.directory / event.name).is_symlink()
        ):
            self._writing[event.name] = now

    def _refresh(self, notify: bool) -> tuple[PoolSet, list[ConfigError]]:
        with self._lock:
            self._scan()
            pools, errors = self._merge()
            if pools != self._current or errors != self._errors:
                self._log_change(pools, errors)
                self._current, self._errors = pools, errors
                if notify:
                    try:
                        self._on_change(pools, list(errors))
                    except Exception:
                        log.exception("pool change handler failed")
            return pools, list(errors)

    def _scan(self) -> None:
        names = self._list()
        if names is None:
            return  # cannot list: keep every file's last state rather than drop all pools
        for gone in set(self._files) - set(names):
            del self._files[gone]
        now = time.monotonic()
        for name, since in list(self._writing.items()):
            if now - since >= self._write_settle:
                del self._writing[name]
        for name in names:
            if name not in self._writing:
                self._read(name)

    def _list(self) -> list[str] | None:
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            if not self._missing:
                log.warning("pool directory %s does not exist: no pools", self.directory)
            self._missing = True
            self._directory_error = None
            return []
        except OSError as exc:
            self._directory_error = ConfigError(
                str(self.directory), DIRECTORY_PATH, f"cannot list: {exc.strerror or exc}"
            )
            return None
        if self._missing:
            log.info("pool directory %s exists now", self.directory)
        self._missing = False
        self._directory_error = None
        names: list[str] = []
        for entry in entries:
            try:
                # is_file() follows symlinks: kubelet's files are symlinks into ..data.
                if is_pool_file_name(entry.name) and entry.is_file():
                    names.append(entry.name)
            except OSError:
                continue
        return sorted(names)

    def _read(self, name: str) -> None:
        path = self.directory / name
        source = str(path)
        state = self._files.get(name) or _FileState()
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            self._files.pop(name, None)  # gone since the listing: as if never listed
            return
        except OSError as exc:
            state.content = None
            state.errors = (ConfigError(source, FILE_PATH, f"cannot read: {exc.strerror or exc}"),)
            self._files[name] = state
            return
        self._files[name] = state
        if content == state.content:
            return
        state.content = content
        syntax = SUFFIX_SYNTAX[os.path.splitext(name)[1]]
        try:
            pools = self._parser(content.decode("utf-8"), source, syntax)
        except UnicodeDecodeError as exc:
            state.errors = (ConfigError(source, FILE_PATH, f"not UTF-8: {exc.reason} at byte {exc.start}"),)
        except ConfigErrors as exc:
            state.errors = tuple(exc.errors)
        except Exception as exc:
            log.exception("parsing %s failed unexpectedly", source)
            state.errors = (ConfigError(source, FILE_PATH, f"internal error while parsing: {exc!r}"),)
        else:
            state.good = tuple(pools)
            state.errors = ()
            return
        if state.good is not None:
            log.warning(
                "%s is invalid; keeping its last good version (pools: %s)",
                source,
                ", ".join(p.name for p in state.good) or "none",
            )

    def _merge(self) -> tuple[PoolSet, tuple[ConfigError, ...]]:
        errors: list[ConfigError] = [self._directory_error] if self._directory_error else []
        owners: dict[str, str] = {}
        pools: list[Pool] = []
        for name in sorted(self._files):
            state = self._files[name]
            errors.extend(state.errors)
            for index, pool in enumerate(state.good or ()):
                owner = owners.get(pool.name)
                if owner is not None:
                    errors.append(
                        ConfigError(
                            pool.source,
                            f"pools[{index}].name",
                            f"pool {pool.name!r} is also defined in {owner}, which wins; "
                            "this definition is ignored",
                        )
                    )
                    continue
                owners[pool.name] = pool.source
                pools.append(pool)
        return PoolSet(tuple(pools)), tuple(errors)

    def _log_change(self, pools: PoolSet, errors: tuple[ConfigError, ...]) -> None:
        for error in errors:
            if error not in self._errors:
                log.error(
                    "pool config error: %s",
                    error,
                    extra={"config_source": error.source, "config_path": error.path},
                )
        for error in self._errors:
            if error not in errors:
                log.info("pool config error resolved: %s", error)
        if pools != self._current:
            before, after = self._current.by_name(), pools.by_name()
            added = sorted(after.keys() - before.keys())
            removed = sorted(before.keys() - after.keys())
            changed = sorted(n for n in after.keys() & before.keys() if after[n] != before[n])
            log.info(
                "pools from %s: added %s, removed %s, changed %s",
                self.directory,
                added or "none",
                removed or "none",
                changed or "none",
            )
