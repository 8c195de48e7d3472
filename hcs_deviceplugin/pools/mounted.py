"""ConfigMaps as kubelet mounts them, read from disk into :class:`ConfigMapObject` values.

The pools directory has two layouts, both read (the mounted-directory source and ``validate-config``
share this reading):

* **Top-level files** ``*.yaml``, ``*.yml``, ``*.json``: one ConfigMap mounted at the directory, or
  files put there by hand. Each file is an object of its own (name and key = the file name, source =
  its path), so one broken file never holds back another — the behaviour the directory always had.
* **Sub-directories**, one per mounted ConfigMap: the directory name is the ConfigMap's name and each
  file in it a data key. When the directory is a kubelet volume (it has ``..data``), the keys are read
  from the payload ``..data`` points at, so a read never mixes two versions of the ConfigMap.

Names starting with ``.`` are skipped everywhere: kubelet's ``..data`` and ``..<timestamp>`` entries,
editors' and our tests' temporary files. Mounted files carry no labels and no ``resourceVersion``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.pools.errors import FILE_PATH, ConfigError
from hcs_deviceplugin.pools.formats import NATIVE_SUFFIXES
from hcs_deviceplugin.pools.objects import ConfigMapObject

KUBELET_DATA = "..data"
_READ_ATTEMPTS = 3
"""A kubelet swap can delete the payload we resolved while we read it; reading again settles it."""


def is_pool_file_name(name: str) -> bool:
    """Whether a top-level entry's name makes it a pool file (its type is checked separately)."""
    return not name.startswith(".") and os.path.splitext(name)[1] in NATIVE_SUFFIXES


@dataclass(frozen=True)
class Listing:
    """What a pools directory holds: top-level pool files and mounted-ConfigMap sub-directories."""

    files: tuple[str, ...] = ()
    configmaps: tuple[str, ...] = ()


class ReadError(Exception):
    """An object that exists but cannot be read (permissions, not UTF-8); carries the error to report."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


def list_mounted(directory: Path) -> Listing:
    """The pool files and ConfigMap sub-directories of ``directory``, sorted; raises OSError."""
    files: list[str] = []
    configmaps: list[str] = []
    for entry in os.scandir(directory):
        if entry.name.startswith("."):
            continue
        try:
            # is_file()/is_dir() follow symlinks: kubelet's keys are symlinks into ..data.
            if entry.is_dir():
                configmaps.append(entry.name)
            elif is_pool_file_name(entry.name) and entry.is_file():
                files.append(entry.name)
        except OSError:
            continue
    return Listing(tuple(sorted(files)), tuple(sorted(configmaps)))


def read_file_object(directory: Path, name: str, namespace: str = "") -> ConfigMapObject:
    """A top-level pool file as an object of its own. Raises FileNotFoundError if it is gone (as if
    never listed) and :class:`ReadError` if it cannot be read."""
    path = directory / name
    text = _read_text(path)
    return ConfigMapObject(name=name, namespace=namespace, data={name: text}, source=str(path))


def read_configmap_directory(directory: Path, name: str, namespace: str = "") -> ConfigMapObject:
    """A mounted ConfigMap sub-directory as one object. Raises FileNotFoundError if the directory is
    gone and :class:`ReadError` if a key cannot be read."""
    path = directory / name
    for attempt in range(_READ_ATTEMPTS):
        try:
            data = {key: _read_text(file) for key, file in _keys(path)}
        except FileNotFoundError:
            if not path.is_dir():
                raise
            if attempt == _READ_ATTEMPTS - 1:
                raise ReadError(
                    ConfigError(str(path), FILE_PATH, "keeps changing while being read")
                ) from None
            continue
        except OSError as exc:
            raise ReadError(ConfigError(str(path), FILE_PATH, f"cannot read: {exc.strerror or exc}")) from exc
        return ConfigMapObject(name=name, namespace=namespace, data=data, source=str(path))
    raise AssertionError("unreachable")  # pragma: no cover


def _keys(path: Path) -> list[tuple[str, Path]]:
    """(key, file to read) of a ConfigMap directory, read through ``..data`` when it has one."""
    payload = path
    link = path / KUBELET_DATA
    if link.is_dir():
        payload = path / os.readlink(link) if link.is_symlink() else link
    keys: list[tuple[str, Path]] = []
    for entry in os.scandir(payload):
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_file():
                keys.append((entry.name, payload / entry.name))
        except OSError:
            continue
    return sorted(keys)


def _read_text(path: Path) -> str:
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ReadError(ConfigError(str(path), FILE_PATH, f"cannot read: {exc.strerror or exc}")) from exc
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadError(
            ConfigError(str(path), FILE_PATH, f"not UTF-8: {exc.reason} at byte {exc.start}")
        ) from exc
