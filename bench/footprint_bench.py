"""The real ``hcs-deviceplugin run`` process on a simulated 16-card node with 8 pools.

Reports its resident memory once every pool is registered and streaming, without and with the
Kubernetes API pool source (the test suite's fake API server, through a kubeconfig), and the latency
of a ``/metrics`` scrape (median and p99 over many scrapes), the numbers a platform team sizes
requests/limits and scrape intervals by. Beside them the floor: an interpreter that has imported
grpc and nothing else. Then Allocate of 1 and 8 units against the running process, metrics
interceptor and all, with its median above a no-op call on the same socket: Allocate as kubelet
sees it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc
import yaml

from bench.common import Result, compiled_env, headline, interleaved, precompile, short
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.sockets import socket_name_for
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume

CARDS = 16
POOLS = 8
WAIT = 30.0


def node_description() -> dict[str, object]:
    cards = [
        {
            "id": f"GPU-{i:08x}-0000-4000-8000-{i:012x}",
            "vendor": "nvidia",
            "model": "NVIDIA H100 80GB HBM3",
            "index": i,
            "pciAddress": f"0000:{0x10 + i:02x}:00.0",
            "pciVendorId": 0x10DE,
            "pciDeviceId": 0x2330,
            "numa": i // 8,
            "memoryMiB": 81559,
        }
        for i in range(CARDS)
    ]
    return {"node": "bench-16", "cards": cards}


def pools_document(card_ids: list[str]) -> str:
    per_pool = CARDS // POOLS
    pools = [
        {
            "name": f"pool-{p}",
            "slicesPerUnit": 4 if p % 2 else 1,
            "devices": [{"uuid": c} for c in card_ids[p * per_pool : (p + 1) * per_pool]],
        }
        for p in range(POOLS)
    ]
    return yaml.safe_dump({"version": "v1", "pools": pools}, sort_keys=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f'clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{port}"}}}}]\n'
        "users: [{name: daemon, user: {token: t}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: daemon}}]\ncurrent-context: fake\n"
    )
    return path


def grpc_floor_kib() -> int:
    """RSS of ``python -c 'import grpc'`` once imported: what any Python device plugin starts from."""
    code = "import grpc; print(open('/proc/self/status').read())"
    status = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))


def time_allocate(kubelet: KubeletSimulator, plugin_dir: Path, calls: int) -> list[Result]:
    """No-op call, then Allocate of 1 and of 8 units, on pool-1's socket (2 cards x 4 slices)."""
    resource = "gpu.deckhouse.io/pool-1"
    units = sorted(kubelet.resource(resource).healthy)
    channel = grpc.insecure_channel(f"unix:{plugin_dir / socket_name_for(resource)}")
    stub = pb_grpc.DevicePluginStub(channel)

    def allocate(n: int) -> pb.AllocateRequest:
        return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=units[:n])])

    one, eight = allocate(1), allocate(8)
    try:
        floor_samples, one_samples, eight_samples = interleaved(
            [
                lambda: stub.GetDevicePluginOptions(pb.Empty()),
                lambda: stub.Allocate(one),
                lambda: stub.Allocate(eight),
            ],
            calls,
        )
    finally:
        channel.close()
    floor = statistics.median(floor_samples)
    return [
        Result("run process: no-op gRPC: floor", floor_samples, floor),
        Result("run process: Allocate, 1 unit", one_samples, floor),
        Result("run process: Allocate, 8 units", eight_samples, floor),
    ]


allocate_results: list[Result] = []
"""Allocate timings of the last :func:`serve` with scrapes (the run without an API source)."""


def serve(root: Path, api_port: int | None, scrapes: int) -> tuple[int, Result | None]:
    """Run the daemon until every pool streams; its RSS then and (``scrapes``) the scrape latencies,
    then Allocate against the running process (recorded in :data:`allocate_results`)."""
    description = node_description()
    node_file = root / "node.yaml"
    node_file.write_text(yaml.safe_dump(description))
    card_ids = [str(c["id"]) for c in description["cards"]]  # type: ignore[attr-defined]
    write_configmap_volume(root / "pools", {"pools.yaml": pools_document(card_ids)})
    shutil.rmtree(root / "dp", ignore_errors=True)
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    port = free_port()
    command = [sys.executable, "-m", "hcs_deviceplugin.cli", "run", "--plugin-dir", str(root / "dp")]
    command += ["--pools-dir", str(root / "pools"), "--vendors", "simulated", "--node-name", "bench-16"]
    command += ["--backend-option", f"simulated.node={node_file}", "--metrics-address", "127.0.0.1"]
    command += ["--metrics-port", str(port), "--pod-resources-socket", str(root / "pr.sock")]
    command += ["--state-dir", str(root / "state"), "--cdi-dir", str(root / "cdi")]
    if api_port is not None:
        command += ["--kubeconfig", str(kubeconfig(root / "kubeconfig", api_port)), "--kube-namespace", "hcs"]
    env = compiled_env({k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
    proc = subprocess.Popen([*command, "--log-level", "error"], env=env)
    scraped: Result | None = None
    try:
        names = {f"gpu.deckhouse.io/pool-{p}" for p in range(POOLS)}
        kubelet.wait_for(
            lambda k: all(n in k.resources() and k.resource(n).connected for n in names), WAIT, "all pools up"
        )
        url = f"http://127.0.0.1:{port}/metrics"
        samples = []
        size = 0
        for _ in range(scrapes):
            start = time.perf_counter()
            with urllib.request.urlopen(url, timeout=5) as response:
                size = len(response.read())
            samples.append(time.perf_counter() - start)
        if samples:
            scraped = Result(f"/metrics scrape ({size} bytes)", samples)
            allocate_results.extend(time_allocate(kubelet, root / "dp", calls=max(1000, 4 * scrapes)))
        rss = rss_kib(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        kubelet.stop()
    return rss, scraped


def run(scrapes: int = 300) -> list[str]:
    precompile()
    root = Path(tempfile.mkdtemp(prefix="hcsf", dir="/tmp"))
    try:
        rss, scraped = serve(root, None, scrapes)
        from tests.pools.fakeapiserver import FakeApiServer

        with FakeApiServer() as server:
            rss_api, _ = serve(root, server.port, 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    floor = grpc_floor_kib()
    what = f"{CARDS} cards / {POOLS} pools registered"
    headline(
        f"RSS, {what}, no API source",
        f"{rss / 1024:.1f} MiB",
        f"`import grpc` alone {floor / 1024:.1f} MiB; target ≤ 35 MiB",
    )
    headline(f"RSS, {what}, with the API source", f"{rss_api / 1024:.1f} MiB", "target ≤ 50 MiB")
    lines = [
        f"daemon RSS, {what}: {rss / 1024:.1f} MiB",
        f"daemon RSS, {what}, API source on: {rss_api / 1024:.1f} MiB",
        f"floor: RSS of python -c 'import grpc': {floor / 1024:.1f} MiB",
    ]
    if scraped is not None:
        lines.append(scraped.line())
    for result in allocate_results:
        lines.append(result.line())
        if result.floor is not None and "Allocate" in result.name:
            lines.append(result.overhead_line())
            headline(
                f"{result.name} (the real run process, metrics on): median above the floor (p99)",
                f"{short(result.median - result.floor)} ({short(result.p99)})",
                f"floor {short(result.floor)}; target ≤ 20 µs above",
            )
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
