"""ConfigMap change through the Kubernetes API source → ListAndWatch at the kubelet simulator.

The API server is the test suite's fake (real list/watch wire format over HTTP on 127.0.0.1); the
rest is the real path: watch stream → aggregator → daemon → PluginServer → kubelet simulator.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import yaml

from bench.common import Result
from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.apisource import ApiConfigMapSource
from hcs_deviceplugin.pools.objects import ConfigMapObject
from tests.pools.fakeapiserver import FakeApiServer
from vendors.simulated import create_backend

NODE = "builtin:eight-gpu-nvlink"
LABELS = {"app.kubernetes.io/part-of": "hcs-deviceplugin"}
WAIT = 10.0


def run(rounds: int = 50) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="hcsa", dir="/tmp"))
    stop = threading.Event()
    backend = create_backend(BackendConfig(options={"node": NODE}, stop=stop))
    cards = [c.id for c in backend.discover().cards]
    docs = [
        yaml.safe_dump(
            {"version": "v1", "pools": [{"name": "api", "devices": [{"uuid": c} for c in cards[:n]]}]}
        )
        for n in (4, 5)
    ]
    server = FakeApiServer().start()
    server.put_configmap("hcs", "pools", {"pools.yaml": docs[0]}, LABELS)
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    daemon = Daemon(DaemonConfig(plugin_dir=root / "dp", node_name="bench"), {backend.name: backend})
    aggregator = PoolAggregator(daemon.set_pools)

    def on_objects(objects: list[ConfigMapObject]) -> None:
        aggregator.update("api", objects)

    selector = "app.kubernetes.io/part-of=hcs-deviceplugin"
    source = ApiConfigMapSource(server.api_client(), "hcs", selector, on_objects)
    daemon.add_source(lambda _cb: source)
    resource = "gpu.deckhouse.io/api"
    samples = []
    try:
        daemon.start()
        kubelet.wait_for(lambda k: resource in k.resources() and k.resource(resource).connected, WAIT, "up")
        for i in range(1, rounds + 1):
            want = 4 + i % 2
            start = time.monotonic()
            server.put_configmap("hcs", "pools", {"pools.yaml": docs[i % 2]}, LABELS)

            def applied(k: KubeletSimulator, w: int = want) -> bool:
                return len(k.resource(resource).healthy) == w

            kubelet.wait_for(applied, WAIT, "API change applied")
            samples.append(time.monotonic() - start)
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return [Result("ConfigMap via API watch -> ListAndWatch", samples).line()]


if __name__ == "__main__":
    print("\n".join(run()))
