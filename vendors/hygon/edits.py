"""ContainerEdits for Hygon units: the device nodes, the visible-devices variables and the hyhal mount.

Pure at Allocate (ARCHITECTURE.md invariant 7): which node-wide device nodes and which hyhal directory
exist is found once per discovery (:func:`shared_nodes`), and each card's DRM minors come from the
discovery snapshot, so :func:`container_edits` maps values to values and never touches the disk.

What a container gets (hygon.md §3, the same in HAMi's, gpustack's and ROCm's plugins):

* ``/dev/kfd`` (the compute interface, one per node) and ``/dev/mkfd`` (Hygon's own shared node,
  semantics unverified; injected by every Hygon recipe seen) when they exist on the host;
* ``/dev/dri/card<N>`` and ``/dev/dri/renderD<M>`` of each card, once per card however many
  time-slice replicas of it the request holds;
* ``hyhalPath`` (default ``/opt/hyhal``: ``hy-smi``, ``libhsa-runtime64.so``, ``libhydmi.so``; without
  it a workload fails with "open hydmilib:libhydmi.so error") bound read-only at the same path, and
  ``HYHAL_PATH`` pointing at it, as the vendor's images expect;
* ``HIP_VISIBLE_DEVICES`` and ``ROCR_VISIBLE_DEVICES`` = ``0,1,…,k-1`` for ``k`` distinct cards.

Why container ordinals and not host indices: the thunk (libhsakmt) under HIP reads the KFD topology,
which sysfs shows unfiltered inside the container, but it skips every GPU node whose
``/dev/dri/renderD<M>`` it cannot open, and the container has only the render nodes injected here.
So HIP and ROCr number the container's GPUs 0..k-1 in KFD order, and a host index such as ``5`` in a
one-card container would select nothing ("No HIP GPUs are available"). Isolation is by the injected
nodes, as in every plugin read (none sets these variables); the variables only list all k, which
overrides a stale value baked into an image, and both are set so a ROCr-level value cannot hide
cards HIP's list names. Ordinals, not ``DCU-…`` ids, because ordinals are the one form every
HIP/ROCr version accepts.

Host paths under ``/dev`` are the real host paths (not host-root-prefixed): the runtime resolves
them on the host, and the host root is only where this daemon reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount, Unit
from vendors.hygon.drm import DrmMinors

SHARED_DEVICES = ("/dev/kfd", "/dev/mkfd")
VISIBLE_DEVICES_ENVS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
HYHAL_ENV = "HYHAL_PATH"
DEFAULT_HYHAL = "/opt/hyhal"


@dataclass(frozen=True)
class SharedNodes:
    """Node-wide things every Hygon container gets, as found on the host at discovery."""

    devices: tuple[str, ...] = ()
    hyhal: str | None = None


def _under(host_root: Path, path: str) -> Path:
    return host_root / path.lstrip("/")


def present_shared_devices(host_root: Path) -> tuple[str, ...]:
    return tuple(p for p in SHARED_DEVICES if _under(host_root, p).exists())


def shared_nodes(host_root: Path, hyhal_path: str) -> SharedNodes:
    """Which of ``/dev/kfd``, ``/dev/mkfd`` and the hyhal directory exist under ``host_root`` now."""
    hyhal = hyhal_path if hyhal_path and _under(host_root, hyhal_path).is_dir() else None
    return SharedNodes(present_shared_devices(host_root), hyhal)


def container_edits(
    units: Sequence[Unit], minors: Mapping[str, DrmMinors], shared: SharedNodes, backend_name: str
) -> ContainerEdits:
    """The edits for ``units``; ValueError for a unit this backend cannot serve (a caller's bug)."""
    if not units:
        return ContainerEdits()
    cards: dict[str, DrmMinors] = {}
    for unit in units:
        if unit.backend != backend_name:
            raise ValueError(f"unit {unit.id!r} belongs to backend {unit.backend!r}, not {backend_name!r}")
        if unit.partition_id is not None:
            raise ValueError(f"unit {unit.id!r} is a partition; Hygon DCUs are not partitioned here")
        card = minors.get(unit.card_id)
        if card is None:
            raise ValueError(f"unit {unit.id!r} names DCU {unit.card_id!r}, which this node does not have")
        if not card.complete:
            raise ValueError(f"DCU {unit.card_id!r} has no DRM minors (driver unbound at discovery)")
        cards.setdefault(unit.card_id, card)
    paths = list(shared.devices) + [p for card in cards.values() for p in card.device_paths()]
    ordinals = ",".join(str(i) for i in range(len(cards)))
    env = dict.fromkeys(VISIBLE_DEVICES_ENVS, ordinals)
    mounts: tuple[Mount, ...] = ()
    if shared.hyhal is not None:
        env[HYHAL_ENV] = shared.hyhal
        mounts = (Mount(container_path=shared.hyhal, host_path=shared.hyhal, read_only=True),)
    return ContainerEdits(
        env=env,
        devices=tuple(DeviceNode(p, p, "rw") for p in dict.fromkeys(paths)),
        mounts=mounts,
    )
