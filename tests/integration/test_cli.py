"""The command line as an operator runs it: ``simulate --once`` and ``run`` stopped by SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import H100, WAIT, card_pool, pool_doc, resource

CLI = [sys.executable, "-m", "hcs_deviceplugin.cli"]


def test_simulate_once_plays_the_scenario_and_prints_the_final_state() -> None:
    result = subprocess.run(
        [*CLI, "simulate", "--once"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for heading in ("Pools", "Cards", "Allocations (kubelet simulator)", "Scenario"):
        assert heading in out
    assert "gpu.deckhouse.io/nvidia-train" in out and "registered" in out
    assert "5. pool change applied live" in out and "FAILED" not in out
    assert "nvidia-shared-pod-new" in out


def test_run_serves_pools_and_stops_cleanly_on_sigterm() -> None:
    root = Path(tempfile.mkdtemp(prefix="hcs", dir="/tmp"))
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    write_configmap_volume(root / "pools", {"pools.yaml": pool_doc(card_pool("train", H100[0]))})
    proc = subprocess.Popen(
        [
            *CLI,
            "run",
            "--plugin-dir",
            str(root / "dp"),
            "--pools-dir",
            str(root / "pools"),
            "--vendors",
            "simulated",
            "--node-name",
            "node-1",
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HCS_SIMULATED_NODE": "builtin:default"},
    )
    try:
        kubelet.wait_for(
            lambda k: resource("train") in k.resources() and k.resource(resource("train")).connected,
            WAIT,
            "run registered its pool",
        )
        assert (root / "dp" / "hcs-gpu.deckhouse.io_train.sock").is_socket()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, stderr
        assert not (root / "dp" / "hcs-gpu.deckhouse.io_train.sock").exists()
        assert (root / "dp" / "kubelet.sock").is_socket(), "kubelet's socket is not ours to remove"
        assert '"level": "info"' in stderr
        kubelet.wait_for(lambda k: not k.resource(resource("train")).connected, WAIT, "stream closed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_run_rejects_unknown_vendor() -> None:
    result = subprocess.run(
        [*CLI, "run", "--vendors", "nope", "--plugin-dir", "/tmp/x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "unknown vendors ['nope']" in result.stderr
