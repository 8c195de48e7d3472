"""DRM minors of a PCI function: ``card<N>`` (``/dev/dri/card<N>``) and ``renderD<M>``.

Found by the function's address, never by sorted position: HAMi's index mapping handed a container
the wrong ``/dev/dri/card`` on a host where another vendor's GPU (often a BMC VGA as ``card0``) had
taken a minor (dcu-vgpu issue #9, hygon.md §2.3). Two sources, as gpustack reads them: the
function's own ``drm/`` directory, and ``/sys/class/drm/<name>/device`` symlinks resolved to the
function's address; the first is preferred and the second fills in a minor the first lacks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

CLASS_DRM = "sys/class/drm"
DEV_DRI = "/dev/dri"

_CARD = re.compile(r"^card(\d+)$")
_RENDER = re.compile(r"^renderD(\d+)$")


@dataclass(frozen=True)
class DrmMinors:
    """A function's two DRM minors; None where the driver made none (unbound, or a display-less part)."""

    card: int | None = None
    render: int | None = None

    @property
    def complete(self) -> bool:
        return self.card is not None and self.render is not None

    def merged(self, other: DrmMinors) -> DrmMinors:
        return DrmMinors(
            self.card if self.card is not None else other.card,
            self.render if self.render is not None else other.render,
        )

    def device_paths(self) -> tuple[str, ...]:
        """``/dev/dri/card<N>`` and ``/dev/dri/renderD<M>`` as host (and container) paths."""
        paths = []
        if self.card is not None:
            paths.append(f"{DEV_DRI}/card{self.card}")
        if self.render is not None:
            paths.append(f"{DEV_DRI}/renderD{self.render}")
        return tuple(paths)


def _minors_in(names: list[str]) -> DrmMinors:
    card = render = None
    for name in sorted(names):
        if (match := _CARD.match(name)) and card is None:
            card = int(match.group(1))
        elif (match := _RENDER.match(name)) and render is None:
            render = int(match.group(1))
    return DrmMinors(card, render)


def function_minors(function_dir: Path) -> DrmMinors:
    """Minors from ``<function>/drm/``; empty when the directory is missing (driver unbound)."""
    try:
        return _minors_in(os.listdir(function_dir / "drm"))
    except OSError:
        return DrmMinors()


def class_drm_minors(host_root: Path) -> dict[str, DrmMinors]:
    """Address → minors from every ``/sys/class/drm/{card,renderD}*/device`` link (connectors skipped)."""
    found: dict[str, list[str]] = {}
    directory = host_root / CLASS_DRM
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    for name in names:
        if not (_CARD.match(name) or _RENDER.match(name)):
            continue
        device = directory / name / "device"
        if not device.is_symlink():
            continue
        found.setdefault(os.path.basename(os.path.realpath(device)), []).append(name)
    return {address: _minors_in(names) for address, names in found.items()}


def minors_for(function_dir: Path, address: str, by_class: dict[str, DrmMinors]) -> DrmMinors:
    """The function's minors: its ``drm/`` directory first, ``/sys/class/drm`` for what that lacks."""
    return function_minors(function_dir).merged(by_class.get(address, DrmMinors()))


def _belongs(host_root: Path, function_dir: Path, address: str, name: str) -> bool:
    if (function_dir / "drm" / name).is_dir():
        return True
    device = host_root / CLASS_DRM / name / "device"
    return device.is_symlink() and os.path.basename(os.path.realpath(device)) == address


def missing_minors(host_root: Path, function_dir: Path, address: str, minors: DrmMinors) -> list[str]:
    """What is missing of the card's two minors, in sysfs or as ``/dev/dri`` nodes; empty when none is."""
    missing = []
    for prefix, number in (("card", minors.card), ("renderD", minors.render)):
        if number is None:
            missing.append(f"no DRM {prefix} minor for {address}")
            continue
        name = f"{prefix}{number}"
        if not _belongs(host_root, function_dir, address, name):
            missing.append(f"DRM {name} of {address} missing in sysfs")
        elif not (host_root / DEV_DRI.lstrip("/") / name).exists():
            missing.append(f"{host_root / DEV_DRI.lstrip('/') / name} missing")
    return missing
