"""DRA: what NodePrepareResources costs kubelet, and how fast a health change reaches the slice.

Everything real: the DRA plugin on its unix socket, the DRA kubelet simulator calling it, the claim
read through the API client from the fake apiserver, the checkpoint written with fsync, the
CDI names checked against the spec the publisher wrote.

* **Prepare, one claim of one card**: a new claim each round (read, check, checkpoint, answer); the
  floor is a NodePrepareResources with no claims on the same socket (the no-op of this service).
  The simulator dials a fresh connection per call, so the floor includes a connection's set-up.
* **No-op on one kept connection**: the same no-op over one channel, as kubelet calls (it keeps one
  connection per plugin): the call alone, without the set-up.
* **Prepare again (idempotent)**: a claim already prepared, answered from the record.
* **Unprepare**: release and checkpoint.
* **health → ResourceSlice taint**: from the publisher's ``update`` with one device unhealthy to
  the fake apiserver storing the tainted slice (one PUT through the client).
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Any

import grpc

from bench.common import Result
from hcs_deviceplugin.api.dra.v1 import api_pb2 as v1
from hcs_deviceplugin.api.dra.v1 import api_pb2_grpc as v1_grpc
from hcs_deviceplugin.model import Health
from tests.dra.rig import DRIVER, NODE, dra_rig
from tests.dra.sliceschema import problems

WAIT = 10.0


def _tainted(name: str, wanted: bool, slices: dict[str, Any]) -> bool:
    """Whether device ``name`` carries a taint in ``slices`` exactly when ``wanted``."""
    found = [d for s in slices.values() for d in s["spec"]["devices"] if d["name"] == name]
    return bool(found) and bool(found[0].get("taints")) is wanted


def run(rounds: int = 200) -> list[str]:
    """One line per measurement, as ``python -m bench --only dra`` prints them."""
    from hcs_deviceplugin.dra.slices import SliceApi, SlicePublisher

    with dra_rig() as rig:
        rig.start_plugin()
        rig.kubelet.wait_registered(DRIVER, WAIT)
        device = next(d for d in rig.devices if "parent" not in d.attributes)
        floor: list[float] = []
        prepare: list[float] = []
        again: list[float] = []
        unprepare: list[float] = []
        for n in range(rounds):
            ref = rig.put_claim(f"bench-{n}", [device.name])
            start = time.perf_counter()
            rig.kubelet.prepare(DRIVER, [])
            floor.append(time.perf_counter() - start)
            start = time.perf_counter()
            answer = rig.kubelet.prepare(DRIVER, [ref])
            prepare.append(time.perf_counter() - start)
            assert answer.claims[ref[1]].error == "", answer
            start = time.perf_counter()
            rig.kubelet.prepare(DRIVER, [ref])
            again.append(time.perf_counter() - start)
            start = time.perf_counter()
            rig.kubelet.unprepare(DRIVER, [ref])
            unprepare.append(time.perf_counter() - start)
        base = sorted(floor)[len(floor) // 2]
        kept: list[float] = []
        with grpc.insecure_channel(f"unix:{rig.kubelet.drivers[DRIVER].endpoint}") as channel:
            stub = v1_grpc.DRAPluginStub(channel)
            empty = v1.NodePrepareResourcesRequest()
            stub.NodePrepareResources(empty, timeout=WAIT)  # connect outside the measurement
            for _ in range(rounds):
                start = time.perf_counter()
                stub.NodePrepareResources(empty, timeout=WAIT)
                kept.append(time.perf_counter() - start)

        rig.api.slice_validator = problems
        slices = SlicePublisher(SliceApi(rig.api.api_client()), DRIVER, NODE)
        slices.start()
        taint: list[float] = []
        try:
            slices.update(rig.devices)
            assert rig.api.wait_resource_slices(bool, WAIT)
            sick = [replace(d, health=Health.UNHEALTHY) if d is device else d for d in rig.devices]
            for n in range(rounds // 4):
                wanted = sick if n % 2 == 0 else rig.devices
                start = time.perf_counter()
                slices.update(wanted)
                assert rig.api.wait_resource_slices(partial(_tainted, device.name, n % 2 == 0), WAIT)
                taint.append(time.perf_counter() - start)
        finally:
            slices.stop()
        return [
            Result("dra no-op NodePrepareResources (floor)", floor).line(),
            Result("dra no-op Prepare, one kept connection", kept, base).line(),
            Result("dra Prepare one claim (API read+checkpoint)", prepare, base).line(),
            Result("dra Prepare again (idempotent)", again, base).line(),
            Result("dra Unprepare", unprepare, base).line(),
            Result("dra health -> slice taint in the API", taint).line(),
        ]


if __name__ == "__main__":
    for line in run():
        print(line)
