"""Our spec files in the CDI directory: written atomically, and nothing of another tool ever touched.

A runtime reads every ``*.json``/``*.yaml`` in the directory whenever it starts a container that asks
for a CDI device, possibly while we write. So a spec is written to a hidden temp file in the same
directory (``.hcs-deviceplugin-<backend>.json.<pid>.<random>.tmp``, which no runtime reads: wrong
suffix), flushed to disk and renamed over the old one: a reader sees the old spec or the new one,
never half of one. We own exactly the files named ``hcs-deviceplugin-*.json`` and our temp files.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path

from hcs_deviceplugin.cdi.names import SPEC_FILE_PREFIX, spec_file_name
from hcs_deviceplugin.cdi.spec import JsonObject

log = logging.getLogger(__name__)

SPEC_SUFFIX = ".json"
TEMP_PREFIX = "." + SPEC_FILE_PREFIX
TEMP_SUFFIX = ".tmp"
FILE_MODE = 0o644


def render(document: JsonObject) -> bytes:
    """The bytes of a spec: stable (sorted keys), so an unchanged spec is not rewritten. One line:
    ``indent`` would route through the pure-Python encoder, 10x slower on a large node."""
    return (json.dumps(document, sort_keys=True) + "\n").encode()


def is_ours(name: str) -> bool:
    return name.startswith(SPEC_FILE_PREFIX) and name.endswith(SPEC_SUFFIX)


def is_our_temp(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


class SpecDirectory:
    """The CDI directory as far as we own it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def owned(self) -> list[Path]:
        """Our spec files now in the directory, sorted."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return []
        return [self.directory / n for n in names if is_ours(n)]

    def remove_temp_files(self) -> list[Path]:
        """Temp files a killed writer left behind; call only while no other writer runs (at start)."""
        removed: list[Path] = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return removed
        for name in names:
            if is_our_temp(name):
                path = self.directory / name
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def sync(self, documents: Mapping[str, JsonObject], keep: Collection[str] = ()) -> list[str]:
        """Make our files exactly ``documents`` (backend → spec): write changed ones, remove the rest.

        The files of the backends in ``keep`` are left as they are (a backend not yet heard from).
        Returns what changed, for the log. Another tool's file, even of one of our kinds, is left alone.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        changes: list[str] = []
        wanted = {spec_file_name(backend): render(doc) for backend, doc in documents.items()}
        kept = {spec_file_name(backend) for backend in keep}
        for name, content in sorted(wanted.items()):
            if self._write(self.directory / name, content):
                changes.append(f"wrote {name}")
        for path in self.owned():
            if path.name not in wanted and path.name not in kept:
                path.unlink(missing_ok=True)
                changes.append(f"removed {path.name}")
        if changes:
            _fsync_directory(self.directory)
        return changes

    def _write(self, path: Path, content: bytes) -> bool:
        try:
            if path.read_bytes() == content:
                return False
        except FileNotFoundError:
            pass
        temp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
                out.flush()
                os.fchmod(out.fileno(), FILE_MODE)
                os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return True


def _fsync_directory(directory: Path) -> None:
    """Make the renames durable, so a power cut leaves the old spec or the new one."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        log.debug("fsync of %s failed: %s", directory, err)
    finally:
        os.close(fd)
