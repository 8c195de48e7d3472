"""Which ``/dev/cambricon_dev<N>`` belongs to which PCI function, from the ``cambricon`` device class.

Each ``/sys/class/cambricon/cambricon_dev<N>`` has its PCI function as parent, so its ``device``
symlink ends in the BDF (cambricon.md §2.2). That link is the only reliable BDF ↔ N map without cndev:
whether the driver numbers cards in BDF order is unverified, so N is never derived from BDF order.
Other members of the class (``cambricon_ctl``, MIM capability nodes ``cap_dev<N>_mi<M>``) are not
cards and are skipped.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

CLASS_DIR = "sys/class/cambricon"
CARD_NODE_PREFIX = "cambricon_dev"
_CARD_NODE = re.compile(rf"{CARD_NODE_PREFIX}(\d+)")
_BDF = re.compile(r"[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")

log = logging.getLogger(__name__)


def class_device_path(host_root: Path, slot: int) -> Path:
    return host_root / CLASS_DIR / f"{CARD_NODE_PREFIX}{slot}"


def _linked_function(device_link: Path) -> str | None:
    """The BDF ``device`` points at: the link's last component as the kernel writes it
    (``../../../0000:03:00.0``), else the basename of the resolved target."""
    try:
        target = os.readlink(device_link)
    except OSError:
        return None
    name = os.path.basename(target.rstrip("/"))
    if _BDF.fullmatch(name):
        return name
    resolved = os.path.basename(os.path.realpath(device_link))
    return resolved if _BDF.fullmatch(resolved) else None


def slot_map(host_root: Path) -> dict[str, int]:
    """BDF -> N for every ``cambricon_dev<N>`` whose ``device`` link names a function.

    A class device without a ``device`` link cannot be attributed to a card and is skipped (logged at
    debug: its card shows up as having no device node). If two name one BDF, the lower N wins and the
    clash is logged.
    """
    directory = host_root / CLASS_DIR
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    slots: dict[str, int] = {}
    for name in names:
        match = _CARD_NODE.fullmatch(name)
        if match is None:
            continue
        slot = int(match.group(1))
        bdf = _linked_function(directory / name / "device")
        if bdf is None:
            log.debug("%s has no device link; skipped", directory / name)
            continue
        bdf = bdf.lower()
        if bdf in slots and slots[bdf] != slot:
            log.warning("%s and %s%d both name PCI function %s", name, CARD_NODE_PREFIX, slots[bdf], bdf)
            slot = min(slot, slots[bdf])
        slots[bdf] = slot
    return slots
