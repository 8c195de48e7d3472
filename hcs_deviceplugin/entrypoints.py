"""Entry points of one group, read straight from the installed distributions' ``entry_points.txt``.

``importlib.metadata`` answers the same question but costs about as much as the rest of ``run``'s
start-up (it pulls in zipfile, email, csv, ... and re-scans on every call), which a device plugin
that kubelet waits for cannot afford. The format is the PyPA entry points file: an INI file of
``[group]`` sections with ``name = module:attr [extras]`` lines, in a ``*.dist-info`` or ``*.egg-info``
directory of a ``sys.path`` entry; the first distribution of a name on ``sys.path`` wins, as with
``importlib.metadata``. A ``sys.path`` entry that is not a directory (a zip) is read through
``importlib.metadata`` instead, so nothing installed is missed.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from functools import cache

from hcs_deviceplugin.fieldrepr import field_repr

_SUFFIXES = (".dist-info", ".egg-info")


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class EntryPoint:
    """One ``name = module:attr`` line of a group; loading it imports the module."""

    name: str
    value: str
    """``module:attr`` (``attr`` may be dotted); extras in brackets are ignored, as on load."""

    def load(self) -> object:
        module_name, _, attrs = self.value.partition(":")
        target: object = importlib.import_module(module_name.strip())
        for attr in filter(None, attrs.split("[", 1)[0].strip().split(".")):
            target = getattr(target, attr)
        return target


def parse_entry_points(text: str, group: str) -> list[EntryPoint]:
    """The ``group`` section of one ``entry_points.txt``; comments and other sections skipped."""
    found: list[EntryPoint] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section != group:
            continue
        name, sep, value = line.partition("=")
        if sep and name.strip():
            found.append(EntryPoint(name.strip(), value.strip()))
    return found


def _distribution_name(directory: str) -> str:
    """The normalised project name of a ``name-version.dist-info`` directory (PEP 503)."""
    stem = directory.rsplit(".", 1)[0].split("-", 1)[0]
    return re.sub(r"[-_.]+", "-", stem).lower()


def entry_points(group: str) -> tuple[EntryPoint, ...]:
    """Every entry point of ``group`` over ``sys.path``, first distribution of a name winning."""
    return _entry_points(group, tuple(sys.path))


@cache
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in path:
        directory = entry or "."
        if not os.path.isdir(directory):
            if os.path.isfile(directory):
                return _from_importlib(group)
            continue
        try:
            children = sorted(os.listdir(directory))
        except OSError:
            continue
        for child in children:
            if not child.endswith(_SUFFIXES):
                continue
            name = _distribution_name(child)
            if name in seen:
                continue
            seen.add(name)
            try:
                with open(os.path.join(directory, child, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            found.extend(parse_entry_points(text, group))
    return tuple(found)


def _from_importlib(group: str) -> tuple[EntryPoint, ...]:
    from importlib.metadata import entry_points as metadata_entry_points

    return tuple(EntryPoint(ep.name, ep.value) for ep in metadata_entry_points(group=group))
