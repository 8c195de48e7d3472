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

A top-level entry named like a pool file is a pool file whatever it is: a directory, FIFO, device or
dangling symlink there is an error of that file (read by :mod:`.files`, which opens regular files
only), so the object keeps its last good pools instead of silently vanishing from the listing. In a
ConfigMap sub-directory every entry but a directory is a key, read the same way. A ConfigMap
directory's keys together are held to the same 1 MiB as one file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.pools.errors import FILE_PATH, ConfigError
from hcs_deviceplugin.pools.files import ReadError, TooBig, read_text
from hcs_deviceplugin.pools.formats import NATIVE_SUFFIXES
from hcs_deviceplugin.pools.limits import MAX_DOCUMENT_BYTES, too_big_message
from hcs_deviceplugin.pools.objects import ConfigMapObject

__all__ = [
    "KUBELET_DATA",
    "Listing",
    "ReadError",
    "is_pool_file_name",
    "list_mounted",
    "read_configmap_directory",
    "read_file_object",
]

KUBELET_DATA = "..data"
_READ_ATTEMPTS = 3
"""A kubelet swap can delete the payload we resolved while we read it; reading again settles it."""


def is_pool_file_name(name: str) -> bool:
    """Whether a top-level entry's name makes it a pool file (its type is checked separately)."""
    return not name.startswith(".") and os.path.splitext(name)[1] in NATIVE_SUFFIXES


# Made and read within one reload of the directory, on its thread: not frozen, so a start compiles no
# __setattr__ or __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class Listing:
    """What a pools directory holds: top-level pool files and mounted-ConfigMap sub-directories."""

    files: tuple[str, ...] = ()
    configmaps: tuple[str, ...] = ()


def list_mounted(directory: Path) -> Listing:
    """The pool files and ConfigMap sub-directories of ``directory``, sorted; raises OSError."""
    files: list[str] = []
    configmaps: list[str] = []
    for entry in os.scandir(directory):
        if entry.name.startswith("."):
            continue
        if is_pool_file_name(entry.name):
            files.append(entry.name)  # whatever it is: reading it says what is wrong with it
            continue
        try:
            # is_dir() follows symlinks: kubelet's keys are symlinks into ..data.
            if entry.is_dir():
                configmaps.append(entry.name)
        except OSError:
            continue
    return Listing(tuple(sorted(files)), tuple(sorted(configmaps)))


def read_file_object(directory: Path, name: str, namespace: str = "") -> ConfigMapObject:
    """A top-level pool file as an object of its own. Raises FileNotFoundError if it is gone (as if
    never listed) and :class:`ReadError` if it cannot be read."""
    path = directory / name
    text = read_text(path)
    return ConfigMapObject(name=name, namespace=namespace, data={name: text}, source=str(path))


def read_configmap_directory(directory: Path, name: str, namespace: str = "") -> ConfigMapObject:
    """A mounted ConfigMap sub-directory as one object. Raises FileNotFoundError if the directory is
    gone and :class:`ReadError` if a key cannot be read."""
    path = directory / name
    for attempt in range(_READ_ATTEMPTS):
        try:
            data = _read_keys(path)
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


def _read_keys(path: Path) -> dict[str, str]:
    """Every key of a ConfigMap directory, all of them together within the size limit."""
    data: dict[str, str] = {}
    budget = MAX_DOCUMENT_BYTES
    for key, file in _keys(path):
        try:
            text = read_text(file, budget)
        except TooBig:
            raise TooBig(ConfigError(str(path), FILE_PATH, too_big_message(None))) from None
        data[key] = text
        budget -= len(text.encode("utf-8"))
    return data


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
            if entry.is_dir():
                continue  # nested paths are not keys
        except OSError:
            pass
        keys.append((entry.name, payload / entry.name))  # a FIFO or a dangling link is an error
    return sorted(keys)
