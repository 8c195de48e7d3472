"""MIG: profile names as go-nvlib builds them, reading MIG devices, and filling a card with one profile.

Names must match NVIDIA's (``1g.10gb``, ``1c.3g.40gb``, ``1g.10gb+me``): pools and the control plane
already use them, and the mixed-strategy resource names derive from them. nvidia.md §3.11 describes
go-nvlib's route: the GI profile *index* gives the slice count and the attribute suffix, the CI profile
index gives the compute slices, and the memory size is rounded to eighths of the parent's memory.
The profile-info ``name`` field ("MIG 1g.10gb") is not used for that: older drivers do not fill it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from hcs_deviceplugin.backend import PARTITION_FILL
from hcs_deviceplugin.model import Card, NotSupportedError
from vendors.nvidia import nvml, nvml_mig

log = logging.getLogger(__name__)

# Slice count by NVML_GPU_INSTANCE_PROFILE_* index (1_SLICE, 2_SLICE, 3, 4, 7, 8, 6, 1_REV1, 2_REV1, 1_REV2,
# 1_GFX, 2_GFX, 4_GFX, 1_NO_ME, 2_NO_ME, 1_ALL_ME, 2_ALL_ME, 3_GFX).
GI_SLICES = (1, 2, 3, 4, 7, 8, 6, 1, 2, 1, 1, 2, 4, 1, 2, 1, 2, 3)
GI_SUFFIX = (
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "+me",
    "+me",
    "",
    "+gfx",
    "+gfx",
    "+gfx",
    "-me",
    "-me",
    "+me.all",
    "+me.all",
    "+gfx",
)
# Compute slices by NVML_COMPUTE_INSTANCE_PROFILE_* index (1, 2, 3, 4, 7, 8, 6, 1_REV1, 7_NVL).
CI_SLICES = (1, 2, 3, 4, 7, 8, 6, 1, 7)


def memory_gb(memory_mb: int, parent_total_bytes: int) -> int:
    """GB in a profile name: the MIG memory rounded up to eighths of the card, times the card's GiB."""
    if parent_total_bytes <= 0:
        return round(memory_mb / 1024)
    eighths = math.ceil(memory_mb * 2**20 / parent_total_bytes * 8)
    return math.floor(eighths / 8 * math.ceil(parent_total_bytes / 2**30) + 0.5)


def profile_name(gi_slices: int, ci_slices: int, gb: int, suffix: str = "") -> str:
    """``<G>g.<GB>gb<suffix>``, or ``<C>c.<G>g.<GB>gb<suffix>`` when the CI is smaller than its GI."""
    base = f"{gi_slices}g.{gb}gb{suffix}"
    return base if ci_slices == gi_slices else f"{ci_slices}c.{base}"


@dataclass(frozen=True)
class ProfileTable:
    """A card's GPU-instance profiles by id, with the names they produce on this card."""

    parent_total_bytes: int
    by_id: dict[int, nvml_mig.GpuInstanceProfile]

    def name_of(self, profile: nvml_mig.GpuInstanceProfile, ci_slices: int | None = None) -> str:
        g = GI_SLICES[profile.index]
        gb = memory_gb(profile.memory_mb, self.parent_total_bytes)
        return profile_name(g, g if ci_slices is None else ci_slices, gb, GI_SUFFIX[profile.index])

    def find(self, name: str) -> nvml_mig.GpuInstanceProfile | None:
        for profile in self.by_id.values():
            if self.name_of(profile) == name:
                return profile
        return None

    def names(self) -> list[str]:
        return sorted({self.name_of(p) for p in self.by_id.values()})


def profile_table(device: nvml.Device, parent_total_bytes: int) -> ProfileTable:
    """Every GPU-instance profile the card answers (NOT_SUPPORTED / INVALID_ARGUMENT ones skipped)."""
    by_id: dict[int, nvml_mig.GpuInstanceProfile] = {}
    for index in range(nvml.GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = nvml_mig.gpu_instance_profile(device, index)
        except nvml.NvmlError as err:
            if err.code == nvml.ERROR_FUNCTION_NOT_FOUND:
                raise
            continue
        by_id.setdefault(info.id, info)
    return ProfileTable(parent_total_bytes, by_id)


def _ci_profile_index(gi: nvml.GpuInstance, ci_profile_id: int) -> int | None:
    for index in range(nvml.COMPUTE_INSTANCE_PROFILE_COUNT):
        try:
            if nvml_mig.compute_instance_profile(gi, index).id == ci_profile_id:
                return index
        except nvml.NvmlError as err:
            if err.code == nvml.ERROR_FUNCTION_NOT_FOUND:
                raise
    return None


@dataclass(frozen=True)
class MigDevice:
    """What discovery needs about one MIG device."""

    uuid: str
    profile: str
    memory_bytes: int
    gi_id: int
    ci_id: int
    gi_profile_id: int | None
    ci_profile_id: int | None
    placement_start: int | None
    placement_size: int | None
    gi_slices: int
    ci_slices: int


def read_mig_device(parent: nvml.Device, mig: nvml.Device, table: ProfileTable | None) -> MigDevice:
    """Identity and profile of one MIG device, by go-nvlib's route, or from its attributes alone.

    The attribute route (slice counts and memory from ``nvmlDeviceGetAttributes``) is the fallback
    when the instance or profile calls are unsupported; it cannot see ``+me``/``+gfx`` variants.
    """
    attrs = nvml_mig.attributes(mig)
    gi_id, ci_id = nvml_mig.gpu_instance_id(mig), nvml_mig.compute_instance_id(mig)
    total = table.parent_total_bytes if table else nvml.memory_total(parent)
    gi_profile_id = ci_profile_id = start = size = None
    profile = None
    try:
        gi = nvml_mig.gpu_instance_by_id(parent, gi_id)
        gi_info = nvml_mig.gpu_instance_info(gi)
        ci_info = nvml_mig.compute_instance_info(nvml_mig.compute_instance_by_id(gi, ci_id))
        gi_profile_id, ci_profile_id = gi_info.profile_id, ci_info.profile_id
        start, size = gi_info.start, gi_info.size
        gi_profile = table.by_id.get(gi_info.profile_id) if table else None
        ci_index = _ci_profile_index(gi, ci_info.profile_id)
        if gi_profile is not None and ci_index is not None:
            g = GI_SLICES[gi_profile.index]
            profile = profile_name(
                g, CI_SLICES[ci_index], memory_gb(attrs.memory_mb, total), GI_SUFFIX[gi_profile.index]
            )
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
        log.info("MIG instance calls unsupported (%s); naming MIG devices from their attributes", err)
    if profile is None:
        profile = profile_name(
            attrs.gpu_instance_slices, attrs.compute_instance_slices, memory_gb(attrs.memory_mb, total)
        )
    return MigDevice(
        uuid=nvml.uuid(mig),
        profile=profile,
        memory_bytes=attrs.memory_mb * 2**20,
        gi_id=gi_id,
        ci_id=ci_id,
        gi_profile_id=gi_profile_id,
        ci_profile_id=ci_profile_id,
        placement_start=start,
        placement_size=size,
        gi_slices=attrs.gpu_instance_slices,
        ci_slices=attrs.compute_instance_slices,
    )


def _ci_profiles(gi: nvml.GpuInstance) -> list[nvml_mig.ComputeInstanceProfile]:
    """The compute-instance profiles this GPU instance offers."""
    found = []
    for index in range(nvml.COMPUTE_INSTANCE_PROFILE_COUNT):
        try:
            found.append(nvml_mig.compute_instance_profile(gi, index))
        except nvml.NvmlError as err:
            if err.code == nvml.ERROR_FUNCTION_NOT_FOUND:
                raise
    return found


def _full_ci_profile(
    profiles: list[nvml_mig.ComputeInstanceProfile], gi_slices: int
) -> nvml_mig.ComputeInstanceProfile:
    """The plain compute-instance profile that takes the whole GPU instance (C == G)."""
    for profile in profiles:
        if profile.index <= 6 and CI_SLICES[profile.index] == gi_slices:  # 7, 8: REV1 / NVL variants
            return profile
    raise NotSupportedError(f"no compute-instance profile spans a {gi_slices}-slice GPU instance")


def _compute_instances(
    gi: nvml.GpuInstance, profiles: list[nvml_mig.ComputeInstanceProfile]
) -> list[tuple[nvml_mig.ComputeInstanceProfile, nvml.ComputeInstance]]:
    return [
        (profile, ci)
        for profile in profiles
        for ci in nvml_mig.compute_instances(gi, profile.id, max(profile.instance_count, 1))
    ]


def _keep_whole(gi: nvml.GpuInstance, slices: int) -> bool:
    """Make ``gi`` one MIG device (one full compute instance) if it is empty or already that."""
    profiles = _ci_profiles(gi)
    full = _full_ci_profile(profiles, slices)
    existing = _compute_instances(gi, profiles)
    if not existing:
        nvml_mig.create_compute_instance(gi, full.id)
        return True
    return len(existing) == 1 and existing[0][0].id == full.id


def _destroy(gi: nvml.GpuInstance) -> None:
    for _profile, ci in _compute_instances(gi, _ci_profiles(gi)):
        nvml_mig.destroy_compute_instance(ci)
    nvml_mig.destroy_gpu_instance(gi)


def fill_card(card: Card, profile: str, count: int) -> None:
    """Make ``card`` hold exactly ``count`` MIG devices of ``profile`` (one GI + one full CI each).

    ``count`` may be PARTITION_FILL: as many as the card holds of ``profile``.
    Idempotent: existing instances of that profile with one full compute instance are kept; any
    other instance is destroyed (the core only calls this on a card no container holds). MIG mode is
    never changed. Raises NotSupportedError when the card has MIG disabled or unsupported, does not
    know ``profile``, or cannot hold ``count`` of it.
    """
    if count < 1 and count != PARTITION_FILL:
        raise ValueError(f"count must be at least 1 (or PARTITION_FILL), not {count}")
    device = nvml.handle_by_uuid(card.id)
    try:
        current, _pending = nvml.mig_mode(device)
    except nvml.NvmlError as err:
        if err.unsupported:
            raise NotSupportedError(f"card {card.id} not partitionable: no MIG support ({err})") from None
        raise
    if current != 1:
        raise NotSupportedError(f"card {card.id} not partitionable: MIG mode disabled")
    table = profile_table(device, nvml.memory_total(device))
    wanted = table.find(profile)
    if wanted is None:
        raise NotSupportedError(
            f"card {card.id} has no MIG profile {profile!r}; it offers {', '.join(table.names())}"
        )
    if count == PARTITION_FILL:
        count = wanted.instance_count
    if count > wanted.instance_count:
        raise NotSupportedError(
            f"card {card.id} holds at most {wanted.instance_count} × {profile}, not {count}"
        )

    kept = 0
    for info in table.by_id.values():
        capacity = max(info.instance_count, 1)
        for gi in nvml_mig.gpu_instances(device, info.id, capacity):
            if info.id == wanted.id and kept < count and _keep_whole(gi, wanted.slice_count):
                kept += 1
                continue
            _destroy(gi)
    for _ in range(count - kept):
        try:
            gi = nvml_mig.create_gpu_instance(device, wanted.id)
        except nvml.NvmlError as err:
            raise NotSupportedError(f"card {card.id}: cannot create GPU instance {profile}: {err}") from None
        nvml_mig.create_compute_instance(gi, _full_ci_profile(_ci_profiles(gi), wanted.slice_count).id)
    log.info("card %s now holds %d × %s (%d kept)", card.id, count, profile, kept)
