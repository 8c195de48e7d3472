"""ContainerEdits for MLUs, as the official plugin (v2.0.10 and later) builds Allocate without its runtime.

Per card: ``/dev/cambricon_dev<N>`` always, and the card's companion nodes that exist on the host
(``cambricon_ipcm<N>``, ``commu<N>``, ``cambr-msgq:<N>``, ``cambr-rpc:<N>``, ``cmsg_ctrl<N>``); shared:
``cambricon_ctl`` and ``cambricon_gdr`` if they exist (cambricon.md §3). Nodes keep their host names
inside the container (the plugin stopped renumbering in v2.0.10), and ``CAMBRICON_VISIBLE_DEVICES``
lists the host slots N, as the plugin sets it for the Cambricon container runtime. The host ``cnmon``
binary is bind-mounted read-only at its own path when it exists.

Not injected: MIM/sMLU capability nodes (``/dev/cambricon-caps/``; partitions need cndev), the
``ttyMS<N>`` consoles (``--enable-console`` upstream), ``/dev/cambricon/`` (deprecated rpmsg mount) and
``/dev/cambricon-split`` (old mlu-share).

What exists is looked up once, at discovery (:func:`card_edits`, :func:`shared_edits`), under the host
root; the edits carry real host paths. :func:`container_edits` is pure: Allocate does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount, Unit
from vendors.cambricon.probe import card_node

VISIBLE_DEVICES = "CAMBRICON_VISIBLE_DEVICES"
SHARED_NODES = ("/dev/cambricon_ctl", "/dev/cambricon_gdr")
PER_CARD_NODES = (
    "/dev/cambricon_ipcm{n}",
    "/dev/commu{n}",
    "/dev/cambr-msgq:{n}",
    "/dev/cambr-rpc:{n}",
    "/dev/cmsg_ctrl{n}",
)
DEFAULT_CNMON = "/usr/bin/cnmon"


@dataclass(frozen=True)
class CardEdits:
    """What one card adds to a container: its slot and its device nodes (host paths)."""

    slot: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class SharedEdits:
    """What every MLU container gets: the shared nodes and the cnmon mount that exist on the host."""

    nodes: tuple[str, ...] = ()
    cnmon: str | None = None


def _exists(host_root: Path, host_path: str) -> bool:
    return (host_root / host_path.lstrip("/")).exists()


def card_edits(host_root: Path, slot: int) -> CardEdits:
    """``/dev/cambricon_dev<N>`` (always: the card is Unhealthy if it is missing) and its companions."""
    companions = tuple(p.format(n=slot) for p in PER_CARD_NODES if _exists(host_root, p.format(n=slot)))
    return CardEdits(slot, (card_node(slot), *companions))


def shared_edits(host_root: Path, cnmon_path: str) -> SharedEdits:
    nodes = tuple(p for p in SHARED_NODES if _exists(host_root, p))
    cnmon = cnmon_path if cnmon_path and _exists(host_root, cnmon_path) else None
    return SharedEdits(nodes, cnmon)


def container_edits(
    units: Sequence[Unit], cards: Mapping[str, CardEdits], shared: SharedEdits, backend_name: str
) -> ContainerEdits:
    """The edits for ``units``; time-slice replicas of one card add it once.

    A unit of another backend, or of a card with no known slot, is a caller bug: ValueError rather than
    a container without its device.
    """
    if not units:
        return ContainerEdits()
    chosen: dict[int, CardEdits] = {}
    for unit in units:
        if unit.backend != backend_name:
            raise ValueError(f"unit {unit.id!r} belongs to backend {unit.backend!r}, not {backend_name!r}")
        if unit.partition_id is not None:
            raise ValueError(f"unit {unit.id!r} is a partition; MLU partitions (MIM/sMLU) need cndev")
        card = cards.get(unit.card_id)
        if card is None:
            raise ValueError(f"unit {unit.id!r} names MLU {unit.card_id!r}, which has no known /dev slot")
        chosen[card.slot] = card
    slots = sorted(chosen)
    devices: dict[str, DeviceNode] = {}
    for slot in slots:
        for path in chosen[slot].nodes:
            devices.setdefault(path, DeviceNode(path, path, "rw"))
    for path in shared.nodes:
        devices.setdefault(path, DeviceNode(path, path, "rw"))
    mounts = (Mount(shared.cnmon, shared.cnmon, read_only=True),) if shared.cnmon else ()
    return ContainerEdits(
        env={VISIBLE_DEVICES: ",".join(str(s) for s in slots)},
        devices=tuple(devices.values()),
        mounts=mounts,
    )
