"""vNPU layouts: make a chip hold N vNPUs of one template (``Backend.partition``), idempotently.

The core calls ``partition`` only for a chip no running container holds (``hcs_deviceplugin/layouts``),
as it does for MIG. Here, in one job on the chip's worker (every DCMI call still bounded):

1. the template must be one the chip's family offers (families.py, §2.6); otherwise NotSupportedError
   naming the family and the templates it has, before anything is touched;
2. the chip's vNPUs are read back (VDEV_MNG, §2.6): those of the template are kept (up to ``count``),
   every other one is destroyed - unless DCMI says a container uses it (``is_container_used``), in
   which case nothing at all is destroyed and the layout fails: a second guard beside the core's;
3. new vNPUs are created with ``vdev_id = vfg_id = 0xFFFFFFFF`` (the driver picks the ids) until the
   chip holds ``count``, or, for PARTITION_FILL, as many as its free AI cores and memory allow
   (VDEV_MNG/GET_FREE_RESOURCE; the chip's AI cores where that is not supported), stopping early if
   the driver reports the chip full (-8020).

A chip already holding exactly the wanted vNPUs is left alone (no DCMI writes). vNPUs survive a
daemon restart in the driver, and discovery lists them again under the same partition ids.
"""

from __future__ import annotations

import logging

from hcs_deviceplugin.backend import PARTITION_FILL
from hcs_deviceplugin.model import Card, NotSupportedError
from vendors.ascend import abi, calls
from vendors.ascend import attributes as attr
from vendors.ascend.discovery import ChipAddress
from vendors.ascend.families import Family, Template, capacity, templates_for
from vendors.ascend.library import DcmiError, DcmiLibrary

log = logging.getLogger(__name__)


def template_for(card: Card, profile: str) -> Template:
    """The chip's template named ``profile``; NotSupportedError naming the family's templates if none."""
    family = card.attributes.get(attr.FAMILY, Family.UNKNOWN.value)
    offered = templates_for(Family(family), card.attributes.get(attr.CHIP_NAME, ""))
    if not offered:
        raise NotSupportedError(f"chip {card.id} ({family}) has no vNPU templates")
    template = offered.get(profile)
    if template is None:
        raise NotSupportedError(
            f"{family} chip {card.id} has no vNPU template {profile!r}; it offers {', '.join(offered)}"
        )
    return template


def fill_chip(lib: DcmiLibrary, card: Card, template: Template, count: int) -> list[int]:
    """Lay the chip out as ``count`` (or PARTITION_FILL) vNPUs of ``template``; returns their vdev ids.

    Runs on the chip's worker. Raises NotSupportedError when the chip cannot hold the layout or a vNPU
    to destroy is in use.
    """
    if count < 1 and count != PARTITION_FILL:
        raise ValueError(f"count must be at least 1 (or PARTITION_FILL), not {count}")
    address = ChipAddress.of(card)
    c, d = address.card_id, address.device_id
    try:
        existing = [calls.vnpu_info(lib, c, d, vdev) for vdev in calls.vnpu_ids(lib, c, d)]
    except DcmiError as err:
        if err.unsupported:
            raise NotSupportedError(f"chip {card.id}: no vNPU support ({err})") from None
        raise
    limit = len(existing) if count == PARTITION_FILL else count
    kept = [v for v in existing if v.template == template.name][:limit]
    kept_ids = {v.vdev_id for v in kept}
    doomed = [v for v in existing if v.vdev_id not in kept_ids]
    busy = [v.vdev_id for v in doomed if v.in_use]
    if busy:
        raise NotSupportedError(
            f"chip {card.id}: vNPU(s) {', '.join(map(str, busy))} in use by a container; nothing destroyed"
        )
    for vnpu in doomed:
        calls.destroy_vnpu(lib, c, d, vnpu.vdev_id)
        log.info("chip %s: destroyed vNPU %d (%s)", card.id, vnpu.vdev_id, vnpu.template)
    room = _room(lib, card, template, kept)
    if count == PARTITION_FILL:
        wanted = len(kept) + room
        if wanted == 0:
            raise NotSupportedError(f"chip {card.id} has no room for one {template.name}")
    else:
        wanted = count
        if count - len(kept) > room:
            raise NotSupportedError(
                f"chip {card.id} holds at most {len(kept) + room} × {template.name}, not {count}"
            )
    made = [v.vdev_id for v in kept]
    while len(made) < wanted:
        try:
            made.append(calls.create_vnpu(lib, c, d, template.name))
        except DcmiError as err:
            if count == PARTITION_FILL and err.code == abi.ERR_RESOURCE_OCCUPIED and made:
                log.info("chip %s full after %d × %s (%s)", card.id, len(made), template.name, err)
                break
            raise NotSupportedError(f"chip {card.id}: cannot create vNPU {template.name}: {err}") from None
    log.info("chip %s holds %d × %s (%d kept)", card.id, len(made), template.name, len(kept))
    return made


def _room(lib: DcmiLibrary, card: Card, template: Template, kept: list[calls.VnpuInfo]) -> int:
    """How many more ``template`` vNPUs fit: the driver's free resources, else the chip's AI cores."""
    address = ChipAddress.of(card)
    try:
        cores, memory_mb = calls.free_resources(lib, address.card_id, address.device_id)
    except DcmiError as err:
        if not err.unsupported:
            raise
        cores = float(card.attributes.get(attr.AI_CORES, "0")) - sum(v.ai_cores for v in kept)
        memory_mb = card.memory_bytes // 2**20 - sum(v.memory_mb for v in kept)
    return capacity(template, cores, memory_mb)
