"""NVML's MIG instance calls: profiles, GPU and compute instances, a MIG device's attributes.

Kept apart from :mod:`vendors.nvidia.nvml` because only :mod:`vendors.nvidia.mig` calls them, and
that is loaded for a card in MIG mode or a MIG layout: a node without MIG never imports these types.
Errors are :class:`~vendors.nvidia.nvml.NvmlError`, as everywhere in this backend.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pynvml

from vendors.nvidia.nvml import (
    ERROR_FUNCTION_NOT_FOUND,
    ComputeInstance,
    Device,
    GpuInstance,
    NvmlError,
    call,
)

_T = TypeVar("_T")


@dataclass(frozen=True, eq=False)  # never compared: no __eq__/__hash__ to compile at start
class DeviceAttributes:
    """``nvmlDeviceAttributes_t`` of a MIG device: its slices, SMs and memory."""

    multiprocessor_count: int
    gpu_instance_slices: int
    compute_instance_slices: int
    memory_mb: int


@dataclass(frozen=True)
class GpuInstanceProfile:
    """``nvmlGpuInstanceProfileInfo(_v2)_t`` of profile index ``index``; ``name`` is empty from v1."""

    index: int
    id: int
    slice_count: int
    instance_count: int
    multiprocessor_count: int
    memory_mb: int
    name: str


@dataclass(frozen=True)
class ComputeInstanceProfile:
    """``nvmlComputeInstanceProfileInfo(_v2)_t`` of CI profile index ``index``."""

    index: int
    id: int
    slice_count: int
    instance_count: int
    name: str


@dataclass(frozen=True, eq=False)  # never compared: no __eq__/__hash__ to compile at start
class InstanceInfo:
    """``nvmlGpuInstanceInfo_t`` / ``nvmlComputeInstanceInfo_t``: id, profile id and placement."""

    id: int
    profile_id: int
    start: int
    size: int


def gpu_instance_id(device: Device) -> int:
    return int(call("nvmlDeviceGetGpuInstanceId", device))


def compute_instance_id(device: Device) -> int:
    return int(call("nvmlDeviceGetComputeInstanceId", device))


def attributes(device: Device) -> DeviceAttributes:
    raw = call("nvmlDeviceGetAttributes_v2", device)
    return DeviceAttributes(
        multiprocessor_count=int(raw.multiprocessorCount),
        gpu_instance_slices=int(raw.gpuInstanceSliceCount),
        compute_instance_slices=int(raw.computeInstanceSliceCount),
        memory_mb=int(raw.memorySizeMB),
    )


def _with_v1_fallback(call_v2: Callable[[], _T], call_v1: Callable[[], _T]) -> _T:
    """Prefer the ``…V`` symbol pynvml uses by default; use the v1 one when the library lacks it."""
    try:
        return call_v2()
    except NvmlError as err:
        if err.code != ERROR_FUNCTION_NOT_FOUND:
            raise
        return call_v1()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_instance_profile(device: Device, profile_index: int) -> GpuInstanceProfile:
    def read(version: int) -> GpuInstanceProfile:
        raw = call("nvmlDeviceGetGpuInstanceProfileInfo", device, profile_index, version)
        return GpuInstanceProfile(
            index=profile_index,
            id=int(raw.id),
            slice_count=int(raw.sliceCount),
            instance_count=int(raw.instanceCount),
            multiprocessor_count=int(raw.multiprocessorCount),
            memory_mb=int(raw.memorySizeMB),
            name=_text(raw.name) if version == 2 else "",
        )

    return _with_v1_fallback(lambda: read(2), lambda: read(1))


def compute_instance_profile(gi: GpuInstance, profile_index: int) -> ComputeInstanceProfile:
    def read(version: int) -> ComputeInstanceProfile:
        raw = call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, profile_index, 0, version)
        return ComputeInstanceProfile(
            index=profile_index,
            id=int(raw.id),
            slice_count=int(raw.sliceCount),
            instance_count=int(raw.instanceCount),
            name=_text(raw.name) if version == 2 else "",
        )

    return _with_v1_fallback(lambda: read(2), lambda: read(1))


def gpu_instance_by_id(device: Device, gi_id: int) -> GpuInstance:
    return GpuInstance(call("nvmlDeviceGetGpuInstanceById", device, gi_id))


def gpu_instance_info(gi: GpuInstance) -> InstanceInfo:
    raw = call("nvmlGpuInstanceGetInfo", gi)
    return InstanceInfo(int(raw.id), int(raw.profileId), int(raw.placement.start), int(raw.placement.size))


def compute_instance_by_id(gi: GpuInstance, ci_id: int) -> ComputeInstance:
    return ComputeInstance(call("nvmlGpuInstanceGetComputeInstanceById", gi, ci_id))


def compute_instance_info(ci: ComputeInstance) -> InstanceInfo:
    raw = call("nvmlComputeInstanceGetInfo", ci)
    return InstanceInfo(int(raw.id), int(raw.profileId), int(raw.placement.start), int(raw.placement.size))


def gpu_instances(device: Device, profile_id: int, capacity: int) -> list[GpuInstance]:
    """Existing GPU instances of ``profile_id``; ``capacity`` is the profile's instance count."""
    array = (pynvml.c_nvmlGpuInstance_t * max(capacity, 1))()
    count = ctypes.c_uint(0)
    call("nvmlDeviceGetGpuInstances", device, profile_id, array, ctypes.byref(count))
    return [GpuInstance(array[k]) for k in range(count.value)]


def compute_instances(gi: GpuInstance, profile_id: int, capacity: int) -> list[ComputeInstance]:
    array = (pynvml.c_nvmlComputeInstance_t * max(capacity, 1))()
    count = ctypes.c_uint(0)
    call("nvmlGpuInstanceGetComputeInstances", gi, profile_id, array, ctypes.byref(count))
    return [ComputeInstance(array[k]) for k in range(count.value)]


def create_gpu_instance(device: Device, profile_id: int) -> GpuInstance:
    return GpuInstance(call("nvmlDeviceCreateGpuInstance", device, profile_id))


def create_compute_instance(gi: GpuInstance, profile_id: int) -> ComputeInstance:
    return ComputeInstance(call("nvmlGpuInstanceCreateComputeInstance", gi, profile_id))


def destroy_gpu_instance(gi: GpuInstance) -> None:
    call("nvmlGpuInstanceDestroy", gi)


def destroy_compute_instance(ci: ComputeInstance) -> None:
    call("nvmlComputeInstanceDestroy", ci)
