"""The daemon speaks protobuf through its generated ``api_wire`` codecs: a ``run`` daemon that serves a
pool through registration, ListAndWatch, GetPreferredAllocation, Allocate and pod-resources polls, and a
DRA plugin that answers registration, Prepare, Unprepare and builds its health list, never load the
``google.protobuf`` runtime or an ``api_pb2`` module (tens of milliseconds of every start)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import H100, WAIT, card_pool, end_daemon_run, pool_doc, resource
from tests.integration.test_cli import CLI, free_port


def imported_modules(importtime_log: str) -> set[str]:
    """The modules a ``python -X importtime`` process imported, from its stderr."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_log.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def protobuf_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == "google" or m.startswith("google.") or m.endswith("_pb2"))


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def test_a_run_daemon_serving_a_pool_never_imports_protobuf() -> None:
    root = Path(tempfile.mkdtemp(prefix="hcsw", dir="/tmp"))
    port = free_port()
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    write_configmap_volume(root / "pools", {"pools.yaml": pool_doc(card_pool("train", *H100[:2]))})
    command = [sys.executable, "-X", "importtime", *CLI[1:], "run", "--vendors", "simulated"]
    proc = subprocess.Popen(
        [
            *command,
            *("--plugin-dir", str(root / "dp"), "--pools-dir", str(root / "pools")),
            *("--cdi-dir", str(root / "cdi"), "--node-name", "node-1"),
            *("--metrics-address", "127.0.0.1", "--metrics-port", str(port)),
            *("--pod-resources-socket", str(root / "pr.sock"), "--pod-resources-interval", "0.1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HCS_SIMULATED_NODE": "builtin:default"},
    )
    try:
        name = resource("train")
        kubelet.wait_for(
            lambda k: name in k.resources() and k.resource(name).connected, WAIT, "pool registered, streaming"
        )
        kubelet.wait_for(lambda k: len(k.resource(name).healthy) == 2, WAIT, "both cards listed")
        first = kubelet.allocate("trainer", "main", name, 1)
        again = kubelet.allocate("trainer", "sidecar", name, 1)
        assert len(first.device_ids) == len(again.device_ids) == 1
        # The daemon learns who holds what from pod-resources List: decoded by the codecs too.
        kubelet.wait_for(lambda k: 'pod="trainer"' in metrics(port), WAIT, "pod-resources polled")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, stderr[-2000:]
    finally:
        end_daemon_run(proc, kubelet, root)
    modules = imported_modules(stderr)
    assert "hcs_deviceplugin.api.deviceplugin.v1beta1.api_wire" in modules
    assert "hcs_deviceplugin.api.podresources.v1.api_wire" in modules
    assert protobuf_modules(modules) == []


DRA_PROBE = """
import json, sys, tempfile
from pathlib import Path
from hcs_deviceplugin import runner
from hcs_deviceplugin.api.dra.v1 import api_wire as dra
from hcs_deviceplugin.api.pluginregistration.v1 import api_wire as reg
from hcs_deviceplugin.dra import claims, frontend, slices
from hcs_deviceplugin.dra.health import HealthFeed
from hcs_deviceplugin.dra.checkpoint import PreparedDevice
from hcs_deviceplugin.dra.preparer import PrepareResult
from hcs_deviceplugin.dra.server import DRA_V1_SERVICE, REGISTRATION_SERVICE, DraPluginServer
from hcs_deviceplugin.rpc.client import unary_call

class Preparer:
    def prepare(self, claim):
        device = PreparedDevice(("gpu",), "node", "gpu-0", "card", "unit", "holder", ("v.com/g=0",))
        return PrepareResult((device,))
    def unprepare(self, claim):
        return ""

root = Path(tempfile.mkdtemp(prefix="dra-wire-", dir="/tmp"))
feed = HealthFeed("node")
server = DraPluginServer("gpu.example.com", root / "p", root / "r", Preparer(), feed)
server.start()
try:
    raw = unary_call(server.registration_path, REGISTRATION_SERVICE + "GetInfo", b"", 5.0)
    assert reg.PluginInfo.FromString(raw).name == "gpu.example.com"
    claim = dra.Claim(namespace="ns", uid="u1", name="c")
    ask = dra.NodePrepareResourcesRequest(claims=[claim]).SerializeToString()
    raw = unary_call(server.endpoint, DRA_V1_SERVICE + "NodePrepareResources", ask, 5.0)
    [device] = dra.NodePrepareResourcesResponse.FromString(raw).claims["u1"].devices
    assert device.device_name == "gpu-0"
    ask = dra.NodeUnprepareResourcesRequest(claims=[claim]).SerializeToString()
    raw = unary_call(server.endpoint, DRA_V1_SERVICE + "NodeUnprepareResources", ask, 5.0)
    assert dra.NodeUnprepareResourcesResponse.FromString(raw).claims["u1"].error == ""
    feed.snapshot()[1].SerializeToString()
finally:
    server.stop()
print(json.dumps(sorted(sys.modules)))
"""


def test_a_dra_plugin_answers_kubelet_without_protobuf() -> None:
    out = subprocess.run(
        [sys.executable, "-c", DRA_PROBE], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert "hcs_deviceplugin.dra.server" in loaded and "hcs_deviceplugin.api.dra.v1.api_wire" in loaded
    assert protobuf_modules(loaded) == []
