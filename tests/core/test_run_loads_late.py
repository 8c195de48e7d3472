"""What ``hcs-deviceplugin run`` loads only once its pools stream, watched in a real run.

``test_run_imports`` checks that importing ``run``'s code leaves these modules out; this checks the
run itself: its start does not load them on the way to serving either (building a pool's topology
would load the allocator), and they are loaded afterwards by the thread whose job they are, before
the heap is frozen (the allocator and the topologies: ``Daemon.prepare_allocation``) or as the HTTP
server is built (the probes and the report). Imports are seen through the interpreter's own audit
hook, with the thread that made each: nothing of ours is replaced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import H100, WAIT, card_pool, end_daemon_run, pool_doc, resource
from tests.integration.test_cli import free_port, http_get
from tests.waiting import wait_until

WATCHED_RUN = """
import gc, os, sys, threading
log = open(os.environ["LOAD_LOG"], "a", buffering=1)
watched = tuple(os.environ["WATCHED"].split(","))

def loaded(event, args):
    if event == "import" and args[0].startswith(watched):
        log.write(f"{args[0]} {threading.current_thread().name}\\n")

def collected(phase, info):
    if phase == "start" and info["generation"] == 2:
        log.write("frozen-next settle-heap\\n")

sys.addaudithook(loaded)
gc.callbacks.append(collected)
from hcs_deviceplugin.cli import main
sys.exit(main())
"""
"""``run`` with each first load of a ``$WATCHED`` module written to ``$LOAD_LOG`` as ``module
thread``; ``frozen-next`` marks a full collection (the first is settle's, just before the freeze)."""

NEVER_LOADED = ("hcs_deviceplugin.layouts",)
"""What a run without Partition pools never needs: the MIG/vNPU layout planner."""

LOADED_LATE = {
    "hcs_deviceplugin.allocation": "settle-heap",  # topologies, the search: Daemon.prepare_allocation
    "hcs_deviceplugin.allocator": "settle-heap",
    "hcs_deviceplugin.observability.probes": "observability-http",  # as the HTTP server is built
    "hcs_deviceplugin.observability.report": "observability-http",
    "waitress": "observability-http",
}


def test_a_run_loads_the_allocator_and_the_http_answers_only_once_its_pools_stream() -> None:
    root = Path(tempfile.mkdtemp(prefix="hcsl", dir="/tmp"))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    write_configmap_volume(root / "pools", {"pools.yaml": pool_doc(card_pool("train", *H100[:2]))})
    log = root / "loads.log"
    port = free_port()
    command = [sys.executable, "-c", WATCHED_RUN, "run", "--vendors", "simulated", "--node-name", "node-1"]
    command += ["--plugin-dir", str(root / "dp"), "--pools-dir", str(root / "pools")]
    command += ["--cdi-dir", str(root / "cdi"), "--state-dir", str(root / "state")]
    command += ["--metrics-address", "127.0.0.1", "--metrics-port", str(port)]
    command += ["--pod-resources-socket", str(root / "pr.sock")]
    env = {**os.environ, "HCS_SIMULATED_NODE": "builtin:default", "LOAD_LOG": str(log)}
    env["WATCHED"] = ",".join((*LOADED_LATE, *NEVER_LOADED))
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        name = resource("train")
        kubelet.wait_for(lambda k: name in k.resources() and k.resource(name).connected, WAIT, "streaming")
        wait_until(lambda: "frozen-next" in log.read_text(), WAIT, "start-up settled")
        ready = f"http://127.0.0.1:{port}/readyz"
        wait_until(lambda: http_get(ready)[0] == 200, WAIT, "/readyz answered: the HTTP server is built")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, stderr[-2000:]
        lines = [line.split() for line in log.read_text().splitlines()]
    finally:
        end_daemon_run(proc, kubelet, root)
    first: dict[str, str] = {}
    for module, thread in lines:
        watched = next((w for w in LOADED_LATE if module == w or module.startswith(w + ".")), module)
        first.setdefault(watched, thread)
    assert first == {**LOADED_LATE, "frozen-next": "settle-heap"}, "and nothing of NEVER_LOADED"
    frozen_at = [module for module, _ in lines].index("frozen-next")
    assert "hcs_deviceplugin.allocator" in [module for module, _ in lines[:frozen_at]], (
        "loaded before the freeze"
    )
