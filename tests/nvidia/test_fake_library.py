"""The fake libnvidia-ml answers pynvml the way the real library does (nvidia.md §1-2, §6).

These tests call pynvml directly, not the backend, so a fake that drifted from the real ABI is
caught here rather than hidden behind backend code written against the same misunderstanding.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from tests.nvidia.conftest import NVLINK_SYMBOLS, Harness
from vendors.nvidia import nvml
from vendors.nvidia.fake.build import FakeBuildError, build_fake_nvml
from vendors.nvidia.fake.node import H100_MEMORY, dgx_h100_node, gpu, gpu_uuid, h100_mig, mig_node
from vendors.nvidia.tools.nvml_answers import answers

SYMBOLS_580 = Path("/work/shared/design/vendors/nvidia-symbols-580.txt")
# vendors/nvidia/tools/nvml_answers.py on one real H100 80GB HBM3 (a VM, driver 580.159.04, MIG off).
REAL_H100 = Path(__file__).parent / "data" / "h100_580_answers.json"
# Where the fake differs on purpose: a call the backend never makes (not exported), and a clock event
# the real card raised while the "all events" registration was waited on (the fake raises none).
KNOWN_DIFFERENCES = {"nvmlDeviceGetCpuAffinity(1)", "nvmlEventSetWait(200)"}


def _exported(lib: Path) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    out = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@pytest.fixture
def raw(nvidia: Harness) -> Iterator[Harness]:
    """pynvml on the fake with an MIG node loaded, initialised for the test and shut down after."""
    nvidia.node(mig_node())
    nvml.open_library(str(nvidia.lib), Path("/"))
    try:
        yield nvidia
    finally:
        pynvml.nvmlShutdown()


def test_struct_layouts_match_the_header() -> None:
    sizes = {
        pynvml.nvmlPciInfo_t: 68,
        pynvml.c_nvmlMemory_t: 24,
        pynvml.c_nvmlMemory_v2_t: 40,
        pynvml.c_nvmlEventData_t: 32,
        pynvml.c_nvmlDeviceAttributes: 40,
        pynvml.c_nvmlGpuInstanceInfo_t: 24,
        pynvml.c_nvmlComputeInstanceInfo_t: 32,
        pynvml.c_nvmlGpuInstanceProfileInfo_v2_t: 152,
        pynvml.c_nvmlComputeInstanceProfileInfo_v2_t: 136,
    }
    assert {cls.__name__: ctypes.sizeof(cls) for cls in sizes} == {
        cls.__name__: n for cls, n in sizes.items()
    }
    assert pynvml.nvmlPciInfo_t.busId.offset == 36
    assert pynvml.c_nvmlEventData_t.gpuInstanceId.offset == 24


def test_exports_only_names_the_real_library_exports(fake_lib: Path) -> None:
    ours = _exported(fake_lib)
    assert {"nvmlInitWithFlags", "nvmlDeviceGetPciInfo_v3", "nvmlEventSetWait_v2"} <= ours
    assert "nvmlDeviceGetGpuInstanceProfileInfoV" in ours
    if SYMBOLS_580.exists():
        real = {
            line.strip() for line in SYMBOLS_580.read_text().splitlines() if line and not line.startswith("#")
        }
        assert ours - real == set()


def test_omitted_symbols_are_not_exported(fake_lib_without_nvlink: Path) -> None:
    ours = _exported(fake_lib_without_nvlink)
    assert not ours & set(NVLINK_SYMBOLS)
    assert "nvmlDeviceGetUUID" in ours


def test_build_is_cached_by_source_hash(fake_build_dir: Path, fake_lib: Path) -> None:
    assert build_fake_nvml(fake_build_dir) == fake_lib


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "no-such-compiler-hcs")
    with pytest.raises(FakeBuildError, match="C compiler 'no-such-compiler-hcs' not found"):
        build_fake_nvml(tmp_path)


def test_calls_before_init_answer_uninitialized(nvidia: Harness) -> None:
    nvidia.node(mig_node())
    nvml.open_library(str(nvidia.lib), Path("/"))
    pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_identity_and_errors_as_a_real_h100_answers(raw: Harness) -> None:
    assert pynvml.nvmlSystemGetDriverVersion() == "580.159.04"
    assert pynvml.nvmlDeviceGetCount() == 3
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert ctypes.addressof(handle.contents) == ctypes.addressof(
        pynvml.nvmlDeviceGetHandleByIndex(0).contents
    )
    assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA H100 80GB HBM3"
    assert pynvml.nvmlDeviceGetUUID(handle) == gpu_uuid("mig", 0)
    assert pynvml.nvmlDeviceGetMemoryInfo(handle).total == H100_MEMORY
    pci = pynvml.nvmlDeviceGetPciInfo(handle)
    assert (pci.busId, pci.busIdLegacy, pci.pciDeviceId) == ("00000000:18:00.0", "0000:18:00.0", 0x233010DE)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetHandleByIndex(3)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetNumaNodeId(handle)  # x86: NVML does not know, sysfs does
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetNvLinkState(handle, 0)  # no NVLink on this card
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetRetiredPages(handle, 0)  # not exported at all


def test_mig_profiles_and_devices(raw: Harness) -> None:
    parent = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetMigMode(parent) == [1, 1]
    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(parent, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert (info.id, info.instanceCount, info.memorySizeMB, info.name) == (19, 7, 9984, "MIG 1g.10gb")
    v1 = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(parent, 0, version=1)
    assert (v1.id, v1.sliceCount) == (19, 1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetGpuInstanceProfileInfo(parent, pynvml.NVML_GPU_INSTANCE_PROFILE_8_SLICE)
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(parent) == 7
    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0)
    assert pynvml.nvmlDeviceIsMigDeviceHandle(mig).value == 1
    assert pynvml.nvmlDeviceGetUUID(mig).startswith("MIG-")
    assert pynvml.nvmlDeviceGetName(mig) == "NVIDIA H100 80GB HBM3 MIG 2g.20gb"
    back = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    assert ctypes.addressof(back.contents) == ctypes.addressof(parent.contents)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 5)  # empty slot
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 7)  # past the maximum
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetGpuInstanceProfileInfo(parent, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetAttributes(parent)  # only MIG devices have attributes
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetGpuInstanceId(parent)
    assert pynvml.nvmlDeviceGetAttributes(mig).gpuInstanceSliceCount == 2


def test_mig_queries_answer_with_mig_disabled(raw: Harness) -> None:
    disabled = pynvml.nvmlDeviceGetHandleByIndex(2)
    assert pynvml.nvmlDeviceGetMigMode(disabled) == [0, 0]
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(disabled) == 0
    assert pynvml.nvmlDeviceGetGpuInstanceProfileInfo(disabled, 0).id == 19  # answered with MIG off (§6)
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(disabled, 19) == 7
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(disabled, 0)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetGpuInstanceById(disabled, 1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceCreateGpuInstance(disabled, 19)


def _codes(found: dict[str, dict[str, object]]) -> dict[str, object]:
    return {call: answer.get("code", "ok") for call, answer in found.items() if call not in KNOWN_DIFFERENCES}


def test_answers_like_a_real_h100(nvidia: Harness) -> None:
    """Every call the real H100 answered, the fake answers with the same success or error code."""
    real = json.loads(REAL_H100.read_text())
    nvidia.node({"gpus": [gpu("real", 0, bus=6, mig=h100_mig(0))], "topology": [[0]]})
    nvml.open_library(str(nvidia.lib), Path("/"))
    pynvml.nvmlShutdown()
    fake = answers()
    assert _codes(fake) == _codes(real)
    for index in (0, 1, 2, 3, 4, 7, 9):
        call = f"nvmlDeviceGetGpuInstanceProfileInfo({index})"
        assert fake[call]["ok"] == real[call]["ok"], call


def test_gpu_instance_lifecycle_and_placements(raw: Harness) -> None:
    card = pynvml.nvmlDeviceGetHandleByIndex(1)  # 7 × 1g.10gb: full
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlDeviceCreateGpuInstance(card, 19)
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(card, 19) == 0
    instances = (pynvml.c_nvmlGpuInstance_t * 7)()
    count = ctypes.c_uint()
    pynvml.nvmlDeviceGetGpuInstances(card, 19, instances, ctypes.byref(count))
    assert count.value == 7
    with pytest.raises(pynvml.NVMLError_InUse):
        pynvml.nvmlGpuInstanceDestroy(instances[0])
    cis = (pynvml.c_nvmlComputeInstance_t * 1)()
    pynvml.nvmlGpuInstanceGetComputeInstances(instances[0], 0, cis, ctypes.byref(count))
    assert count.value == 1
    pynvml.nvmlComputeInstanceDestroy(cis[0])
    pynvml.nvmlGpuInstanceDestroy(instances[0])
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(card, 19) == 1
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(card, 0) == 0  # 7g needs the whole card
    gi = pynvml.nvmlDeviceCreateGpuInstance(card, 19)
    gi_info = pynvml.nvmlGpuInstanceGetInfo(gi)
    assert (gi_info.profileId, gi_info.placement.start, gi_info.placement.size) == (19, 0, 1)
    ci = pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    assert pynvml.nvmlComputeInstanceGetInfo(ci).profileId == 0


def test_event_wait_times_out_and_delivers_xids(raw: Harness) -> None:
    node = raw.node(mig_node())  # a fresh node file: the fake re-reads it on the next init
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetSupportedEventTypes(handle) == 0xFF9F
        event_set = pynvml.nvmlEventSetCreate()
        pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
        with pytest.raises(pynvml.NVMLError_Timeout):
            pynvml.nvmlEventSetWait(event_set, 0)
        node.control.xid(0, 79)
        data = pynvml.nvmlEventSetWait(event_set, 5000)
        assert (data.eventType, data.eventData, data.gpuInstanceId) == (0x8, 79, 0xFFFFFFFF)
        assert ctypes.addressof(data.device.contents) == ctypes.addressof(handle.contents)
        node.control.lost(0)
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlEventSetWait(event_set, 5000)
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetUUID(handle)
        pynvml.nvmlEventSetFree(event_set)
    finally:
        pynvml.nvmlShutdown()


def test_dgx_nvlinks_reach_the_switches(nvidia: Harness) -> None:
    nvidia.node(dgx_h100_node())
    nvml.open_library(str(nvidia.lib), Path("/"))
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetNvLinkState(handle, 17) == 1
        assert pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, 0) == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
        assert pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, 0).busId == "00000000:05:00.0"
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetNvLinkState(handle, 18)
        other = pynvml.nvmlDeviceGetHandleByIndex(7)
        assert pynvml.nvmlDeviceGetTopologyCommonAncestor(handle, other) == pynvml.NVML_TOPOLOGY_SYSTEM
    finally:
        pynvml.nvmlShutdown()
