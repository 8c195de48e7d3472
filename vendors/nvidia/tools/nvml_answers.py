"""What a libnvidia-ml answers to the raw pynvml calls the backend relies on: value or error code.

Run it once against the real driver and once against the fake (``--library``, with
``HCS_FAKE_NVML_NODE`` set) and diff the two JSON documents: every code that differs is a place where
the fake is not faithful. Read-only: queries, an event set that is created, waited on and freed,
and nothing that changes MIG mode, instances, clocks or the GPU.

    PYTHONPATH=. python3 vendors/nvidia/tools/nvml_answers.py [--library PATH] > answers.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pynvml

Answer = dict[str, object]


def _answer(call: Callable[[], Any]) -> Answer:
    start = time.perf_counter()
    try:
        value = call()
        result: Answer = {"ok": _plain(value)}
    except pynvml.NVMLError as err:
        result = {"code": int(err.value), "error": type(err).__name__}
    except Exception as err:  # report everything, stop at nothing
        result = {"exception": repr(err)}
    result["ms"] = round((time.perf_counter() - start) * 1000, 3)
    return result


def _plain(value: Any) -> object:
    if isinstance(value, ctypes.Structure):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Array):
        return [_plain(v) for v in value]
    if isinstance(value, ctypes._SimpleCData):
        return _plain(value.value)
    if isinstance(value, ctypes._Pointer):
        return "<handle>" if value else None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return repr(value)


def answers() -> dict[str, Answer]:
    out: dict[str, Answer] = {}

    def ask(name: str, call: Callable[[], Any]) -> None:
        out[name] = _answer(call)

    ask("nvmlInit", pynvml.nvmlInit)
    ask("nvmlSystemGetDriverVersion", pynvml.nvmlSystemGetDriverVersion)
    ask("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
    count = pynvml.nvmlDeviceGetCount()
    ask("nvmlDeviceGetHandleByIndex(count)", lambda: pynvml.nvmlDeviceGetHandleByIndex(count))
    ask(
        "nvmlDeviceGetHandleByUUID(unknown)",
        lambda: pynvml.nvmlDeviceGetHandleByUUID("GPU-" + "0" * 8 + "-0000" * 3 + "-" + "0" * 12),
    )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    for name in ("Name", "UUID", "MinorNumber", "Index", "PciInfo", "MemoryInfo", "NumaNodeId", "MigMode",
                 "MaxMigDeviceCount", "SupportedEventTypes", "CudaComputeCapability", "Attributes_v2",
                 "GpuInstanceId", "ComputeInstanceId", "DeviceHandleFromMigDeviceHandle"):  # fmt: skip
        ask(f"nvmlDeviceGet{name}", partial(getattr(pynvml, f"nvmlDeviceGet{name}"), h))
    ask("nvmlDeviceIsMigDeviceHandle", lambda: pynvml.nvmlDeviceIsMigDeviceHandle(h))
    ask(
        "nvmlDeviceGetMemoryInfo(v2)", lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    )
    ask("nvmlDeviceGetMemoryAffinity(1, NODE)", lambda: pynvml.nvmlDeviceGetMemoryAffinity(h, 1, 0))
    ask("nvmlDeviceGetCpuAffinity(1)", lambda: pynvml.nvmlDeviceGetCpuAffinity(h, 1))
    ask("nvmlDeviceGetTopologyCommonAncestor(self)", lambda: pynvml.nvmlDeviceGetTopologyCommonAncestor(h, h))
    for link in (0, 17, 18, 35, 36):
        ask(f"nvmlDeviceGetNvLinkState({link})", partial(pynvml.nvmlDeviceGetNvLinkState, h, link))
    ask("nvmlDeviceGetNvLinkRemotePciInfo(0)", lambda: pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, 0))
    ask("nvmlDeviceGetNvLinkRemoteDeviceType(0)", lambda: pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, 0))
    ask("nvmlDeviceGetNvLinkVersion(0)", lambda: pynvml.nvmlDeviceGetNvLinkVersion(h, 0))
    ask("nvmlDeviceGetMigDeviceHandleByIndex(0)", lambda: pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 0))
    for index in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT + 1):
        ask(
            f"nvmlDeviceGetGpuInstanceProfileInfo({index})",
            partial(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h, index),
        )
    ask(
        "nvmlDeviceGetGpuInstanceProfileInfo(0, v1)",
        lambda: pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, 0, 1),
    )
    ask(
        "nvmlDeviceGetGpuInstanceRemainingCapacity(19)",
        lambda: pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 19),
    )
    placements = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
    n = ctypes.c_uint(8)
    ask("nvmlDeviceGetGpuInstancePossiblePlacements(19)",
        lambda: (pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(h, 19, placements, ctypes.byref(n)),
                 [(p.start, p.size) for p in placements[: n.value]]))  # fmt: skip
    instances = (pynvml.c_nvmlGpuInstance_t * 8)()
    ask(
        "nvmlDeviceGetGpuInstances(19)",
        lambda: pynvml.nvmlDeviceGetGpuInstances(h, 19, instances, ctypes.byref(n)),
    )
    ask("nvmlDeviceGetGpuInstanceById(1)", lambda: pynvml.nvmlDeviceGetGpuInstanceById(h, 1))

    event_set = pynvml.nvmlEventSetCreate()
    ask("nvmlDeviceRegisterEvents(xid|ecc)", lambda: pynvml.nvmlDeviceRegisterEvents(h, 0xB, event_set))
    ask("nvmlDeviceRegisterEvents(xid, again)", lambda: pynvml.nvmlDeviceRegisterEvents(h, 0x8, event_set))
    ask("nvmlDeviceRegisterEvents(all)", lambda: pynvml.nvmlDeviceRegisterEvents(h, 0xFF9F, event_set))
    ask("nvmlEventSetWait(0)", lambda: pynvml.nvmlEventSetWait(event_set, 0))
    ask("nvmlEventSetWait(200)", lambda: pynvml.nvmlEventSetWait(event_set, 200))
    ask("nvmlEventSetFree", lambda: pynvml.nvmlEventSetFree(event_set))

    ask("nvmlInit (second reference)", pynvml.nvmlInit)
    ask("nvmlShutdown (1 of 2)", pynvml.nvmlShutdown)
    ask("nvmlDeviceGetCount (one reference left)", pynvml.nvmlDeviceGetCount)
    ask("nvmlShutdown (2 of 2)", pynvml.nvmlShutdown)
    ask("nvmlDeviceGetCount (after shutdown)", pynvml.nvmlDeviceGetCount)
    ask("nvmlShutdown (extra)", pynvml.nvmlShutdown)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="raw NVML answers as JSON")
    parser.add_argument("--library", help="path of libnvidia-ml.so.1 (default: the loader's search)")
    args = parser.parse_args(argv)
    if args.library:
        pynvml.nvmlLib = ctypes.CDLL(args.library)
    print(json.dumps(answers(), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
