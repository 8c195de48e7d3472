"""MLU-Link and PCIe/NUMA links between MLUs, without cndev.

Nothing in sysfs or procfs describes MLU-Link: the driver keeps it behind cndev ioctls
(``cndevGetMLULinkPortNumber``/``Status``/``RemoteInfo``, cambricon.md §5), which this backend does not
load. So MLU-Link comes from two sources that need no library:

1. **Chips of one board.** Functions whose ``information`` shows the same ``Board Serial Number`` on a
   multi-chip board (:data:`models.CHIPS_PER_BOARD`, e.g. MLU370-X8) are joined on the board. They get
   one MLU-Link link each way and the same ``Card.attributes["linkModule"]`` (set in discovery), so
   the allocator hands out whole boards for even requests: the official plugin's "board" policy. The
   number of on-board ports is cndev-only; one link is assumed.
2. **An operator topology file** (backend option ``mluLinkFile``) for MLU-Link bridges between boards,
   e.g. transcribed from ``cnmon topo``: a YAML (or JSON) list of ``{a: <bdf or card id>, b: ...,
   links: <n>}``. A malformed file is an error naming the file; discovery goes on without it.
   Entries naming a card this node does not have are skipped with a warning (the card may be out).

Host-path links (PCIe switch, host bridge, NUMA) come from :func:`vendors.pcisysfs.topology.host_path_links`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import yaml

from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix
from vendors.cambricon.discovery import LINK_MODULE
from vendors.pcisysfs.pci import PciFunction
from vendors.pcisysfs.topology import host_path_links

log = logging.getLogger(__name__)

_ENTRY_KEYS = frozenset({"a", "b", "links"})


class LinkFileError(Exception):
    """The MLU-Link topology file cannot be used; the message names the file."""


@dataclass(frozen=True)
class LinkEntry:
    """One MLU-Link connection between two cards named by BDF or card id."""

    a: str
    b: str
    links: int = 1


def _entry(path: Path, number: int, raw: object) -> LinkEntry:
    where = f"{path}: entry {number}"
    if not isinstance(raw, dict):
        raise LinkFileError(f"{where} is not a mapping with a, b, links")
    unknown = sorted(str(k) for k in raw if k not in _ENTRY_KEYS)
    if unknown:
        raise LinkFileError(f"{where}: unknown key(s) {', '.join(unknown)} (known: a, b, links)")
    ends = []
    for key in ("a", "b"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise LinkFileError(f"{where}: {key!r} must name a card (PCI address or card id)")
        ends.append(value.strip())
    text = raw.get("links", "1")
    count = int(text) if isinstance(text, str) and text.strip().isdigit() else 0
    if count < 1:
        raise LinkFileError(f"{where}: links must be a positive integer, not {text!r}")
    if ends[0].lower() == ends[1].lower():
        raise LinkFileError(f"{where}: a card cannot link to itself ({ends[0]})")
    return LinkEntry(ends[0], ends[1], count)


def parse_link_file(path: Path, text: str) -> tuple[LinkEntry, ...]:
    """Parse the file's text; LinkFileError (naming ``path``) on any malformed entry.

    Every scalar is read as a string (YAML's base loader): an unquoted ``0000:1a:00.0`` is a
    base-60 number to a YAML 1.1 resolver, and an operator should not have to know that.
    """
    try:
        data = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        raise LinkFileError(f"{path}: not YAML or JSON: {exc}") from None
    if data is None or data == "":
        return ()
    if not isinstance(data, list):
        raise LinkFileError(f"{path}: expected a list of {{a, b, links}} entries, got {type(data).__name__}")
    return tuple(_entry(path, number, raw) for number, raw in enumerate(data, start=1))


def read_link_file(path: Path) -> tuple[LinkEntry, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LinkFileError(f"{path}: {reason}") from None
    return parse_link_file(path, text)


def board_links(cards: Iterable[Card]) -> list[tuple[str, str, Link]]:
    """One MLU-Link between every two chips that share a ``linkModule`` (a multi-chip board)."""
    boards: dict[str, list[str]] = {}
    for card in cards:
        module = card.attributes.get(LINK_MODULE)
        if module:
            boards.setdefault(module, []).append(card.id)
    return [
        (a, b, Link(LinkKind.MLU_LINK, 1)) for ids in boards.values() for a, b in combinations(sorted(ids), 2)
    ]


def file_links(
    entries: Sequence[LinkEntry], cards: Iterable[Card], source: str
) -> list[tuple[str, str, Link]]:
    """The file's entries as links between card ids; entries naming no card here are skipped."""
    by_name: dict[str, str] = {}
    for card in cards:
        by_name[card.id.lower()] = card.id
        by_name[card.pci_address.lower()] = card.id
    pairs = []
    for entry in entries:
        a, b = by_name.get(entry.a.lower()), by_name.get(entry.b.lower())
        if a is None or b is None:
            log.warning(
                "%s: %s <-> %s names a card this node does not have; skipped", source, entry.a, entry.b
            )
            continue
        pairs.append((a, b, Link(LinkKind.MLU_LINK, entry.links)))
    return pairs


def link_matrix(
    cards: Sequence[Card], functions: Mapping[str, PciFunction], entries: Sequence[LinkEntry], source: str
) -> LinkMatrix:
    """Board MLU-Links, file MLU-Links and host-path links of ``cards`` (``functions`` by card id)."""
    fabric = LinkMatrix.from_pairs(board_links(cards) + file_links(entries, cards, source))
    return fabric.merged(host_path_links(functions))
