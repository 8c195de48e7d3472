"""The daemon's generated wire codecs (``api_wire``) beside protobuf's upb messages (``api_pb2``).

Two costs the codecs exist to cut: loading the messages at start (a fresh interpreter importing the
daemon's five ``api_wire`` modules, against the same five ``api_pb2`` modules and ``python -c pass``
as the floor), and building, encoding and decoding the messages the daemon handles (an 8-unit
AllocateResponse, kubelet's AllocateRequest, a 64-device ListAndWatch list), each taken in turn with
protobuf's doing the same, which is the reference the ratio is to.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

from bench.common import Result, compiled_env, headline, interleaved, short
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp_pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as dp_wire

DAEMON_APIS = (
    "deviceplugin.v1beta1",
    "podresources.v1",
    "pluginregistration.v1",
    "dra.v1",
    "drahealth.v1alpha1",
)
"""The APIs a run daemon with a DRA pool speaks."""


def import_line(kind: str) -> str:
    return "; ".join(f"import hcs_deviceplugin.api.{api}.{kind}" for api in DAEMON_APIS)


def fresh(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, env=compiled_env({}))


def allocate_response(module: Any) -> Any:
    """An 8-unit answer shaped like a GPU backend's: env, device nodes, a mount, CDI names."""
    ids = [f"GPU-{n:08x}-0000-0000-0000-000000000000" for n in range(8)]
    return module.AllocateResponse(
        container_responses=[
            module.ContainerAllocateResponse(
                envs={"NVIDIA_VISIBLE_DEVICES": ",".join(ids), "HCS_POOL": "train"},
                devices=[
                    module.DeviceSpec(
                        container_path=f"/dev/nvidia{n}", host_path=f"/dev/nvidia{n}", permissions="rw"
                    )
                    for n in range(8)
                ],
                mounts=[
                    module.Mount(
                        container_path="/usr/bin/nvidia-smi", host_path="/usr/bin/nvidia-smi", read_only=True
                    )
                ],
                cdi_devices=[module.CDIDevice(name=f"nvidia.com/gpu={i}") for i in ids],
            )
        ]
    )


def device_list(module: Any) -> Any:
    return module.ListAndWatchResponse(
        devices=[
            module.Device(
                ID=f"GPU-{n:08x}::{r}",
                health="Healthy",
                topology=module.TopologyInfo(nodes=[module.NUMANode(ID=n % 2)]),
            )
            for n in range(16)
            for r in range(4)
        ]
    )


def pair(name: str, ours: Callable[[], object], theirs: Callable[[], object], count: int) -> list[Result]:
    ours_samples, theirs_samples = interleaved([ours, theirs], count)
    reference = Result(f"{name}: protobuf (upb)", theirs_samples)
    mine = Result(f"{name}: api_wire", ours_samples, reference.median)
    headline(f"wire codecs: {name} (median)", short(mine.median), f"protobuf {short(reference.median)}")
    return [reference, mine]


def run(calls: int = 2000, starts: int = 15) -> list[str]:
    results: list[Result] = []
    floor, wire, pb2 = interleaved(
        [
            lambda: fresh("pass"),
            lambda: fresh(import_line("api_wire")),
            lambda: fresh(import_line("api_pb2")),
        ],
        starts,
    )
    empty = Result("python -c pass (floor)", floor)
    results += [
        empty,
        Result("import the daemon's 5 api_wire modules", wire, empty.median),
        Result("import the same 5 api_pb2 modules", pb2, empty.median),
    ]
    headline(
        "wire codecs: importing the daemon's 5 message modules, above `python -c pass` (median)",
        short(results[1].median - empty.median),
        f"api_pb2: {short(results[2].median - empty.median)}",
    )
    request_pb = dp_pb.AllocateRequest(
        container_requests=[dp_pb.ContainerAllocateRequest(devices_ids=[f"GPU-{n}" for n in range(8)])]
    )
    request = request_pb.SerializeToString()
    response = allocate_response(dp_pb).SerializeToString()
    listing = device_list(dp_pb).SerializeToString()
    results += pair(
        "build + encode an 8-unit AllocateResponse",
        lambda: allocate_response(dp_wire).SerializeToString(),
        lambda: allocate_response(dp_pb).SerializeToString(),
        calls,
    )
    results += pair(
        "decode an 8-id AllocateRequest",
        lambda: dp_wire.AllocateRequest.FromString(request),
        lambda: dp_pb.AllocateRequest.FromString(request),
        calls,
    )
    results += pair(
        "decode an 8-unit AllocateResponse",
        lambda: dp_wire.AllocateResponse.FromString(response),
        lambda: dp_pb.AllocateResponse.FromString(response),
        calls,
    )
    results += pair(
        "build + encode a 64-device ListAndWatch list",
        lambda: device_list(dp_wire).SerializeToString(),
        lambda: device_list(dp_pb).SerializeToString(),
        calls,
    )
    assert dp_wire.ListAndWatchResponse.FromString(listing) == device_list(dp_wire)
    return [result.line() for result in results]


if __name__ == "__main__":
    print("\n".join(run()))
