"""The command line as an operator runs it: ``simulate --once`` and ``run`` stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from hcs_deviceplugin.simulation.hardware import ENTRY_POINT_GROUP as FAKE_HARDWARE_GROUP
from tests.integration.conftest import H100, WAIT, card_pool, end_daemon_run, pool_doc, resource

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
    cdi = out.split("\nCDI specs (")[1].split("\n\n")[0]
    assert "hcs-deviceplugin-simulated.json  hcs.deckhouse.io/simulated" in cdi
    assert "2b. 3 CDI answers resolve in" in out, "the -shared pool delivers through CDI"
    assert "2c. DRA pool hygon-dra: 2 devices in this node's ResourceSlice" in out
    assert "claim hygon-dra-claim prepared: hcs.deckhouse.io/simulated=" in out
    dra = out.split("\nDRA ResourceSlice (this node's pool)\n")[1].split("\n\n")[0].splitlines()[1:]
    assert [line.split()[1] for line in dra] == ["hygon-dra", "hygon-dra"]
    assert "gpu.deckhouse.io/hygon-dra" not in out, "a DRA pool has no device plugin resource"


def test_simulate_on_fake_hardware_serves_every_vendor_fake_through_its_real_backend() -> None:
    """Each registered fake (C libraries built with gcc, sysfs trees) runs its real backend in one daemon."""
    fakes = sorted(ep.name for ep in entry_points(group=FAKE_HARDWARE_GROUP))
    assert {"nvidia", "cambricon"} <= set(fakes)
    result = subprocess.run(
        [*CLI, "simulate", "--once", "--hardware", "fake", "--step-seconds", "0"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped" not in result.stderr, result.stderr
    cards = result.stdout.split("\nCards\n")[1].split("\n\n")[0].splitlines()[1:]
    vendors_shown = {line.split()[1] for line in cards}
    # One vendor label per fake (Ascend chips say "huawei"); the sysfs and NVML ones name themselves.
    assert len(vendors_shown) == len(fakes) and {"nvidia", "hygon", "cambricon"} <= vendors_shown, cards
    assert "3. card" in result.stdout and "4. card" in result.stdout and "Healthy again" in result.stdout
    assert "5. pool change applied live" in result.stdout and "FAILED" not in result.stdout
    cdi = result.stdout.split("\nCDI specs (")[1].split("\n\n")[0].splitlines()[2:]
    assert sorted(line.split()[0] for line in cdi) == [f"hcs-deviceplugin-{name}.json" for name in fakes]
    assert "CDI answers resolve in" in result.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_run_serves_pools_and_stops_cleanly_on_sigterm() -> None:
    root = Path(tempfile.mkdtemp(prefix="hcs", dir="/tmp"))
    port = free_port()
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
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
            "--cdi-dir",
            str(root / "cdi"),
            "--vendors",
            "simulated",
            "--node-name",
            "node-1",
            "--log-format",
            "json",
            "--metrics-address",
            "127.0.0.1",
            "--metrics-port",
            str(port),
            "--pod-resources-socket",
            str(root / "pr.sock"),
            "--state-dir",
            str(root / "state"),
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
        base = f"http://127.0.0.1:{port}"
        kubelet.wait_for(lambda k: http_get(f"{base}/readyz")[0] == 200, WAIT, "/readyz 200")
        status, metrics = http_get(f"{base}/metrics")
        assert status == 200
        assert 'hcs_pool_units{pool="train",resource="gpu.deckhouse.io/train"} 1.0' in metrics
        assert http_get(f"{base}/healthz")[0] == 200
        inspect = subprocess.run(
            [*CLI, "inspect", "--url", base], capture_output=True, text=True, timeout=60, check=False
        )
        assert inspect.returncode == 0, inspect.stderr
        assert H100[0] in inspect.stdout and "train" in inspect.stdout
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, stderr
        assert not (root / "dp" / "hcs-gpu.deckhouse.io_train.sock").exists()
        assert (root / "dp" / "kubelet.sock").is_socket(), "kubelet's socket is not ours to remove"
        spec = json.loads((root / "cdi" / "hcs-deviceplugin-simulated.json").read_text())
        assert spec["kind"] == "hcs.deckhouse.io/simulated", "--cdi-dir reaches the daemon"
        # The spec stays after a stop: containers being created during a restart still resolve.
        assert '"level": "info"' in stderr
        assert "hcs-deviceplugin 0.1.0 started in" in stderr and "pools ['train']" in stderr
        assert "hcs-deviceplugin stopped (SIGTERM) in" in stderr
        assert (root / "state" / "state.json").is_file()
        kubelet.wait_for(lambda k: not k.resource(resource("train")).connected, WAIT, "stream closed")
    finally:
        end_daemon_run(proc, kubelet, root)


def test_validate_config_exit_codes(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(pool_doc(card_pool("train", H100[0])))
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v1\npools:\n  - name: Bad_Name\n")
    ok = subprocess.run(
        [*CLI, "validate-config", str(good)], capture_output=True, text=True, timeout=60, check=False
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = subprocess.run(
        [*CLI, "validate-config", str(good), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert broken.returncode == 1
    assert f"{bad}: pools[0].name" in broken.stdout + broken.stderr


def test_run_rejects_unknown_vendor() -> None:
    result = subprocess.run(
        [*CLI, "run", "--vendors", "nope", "--plugin-dir", "/tmp/x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "unknown vendors ['nope']" in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--watch-node"], "--watch-node needs --in-cluster or --kubeconfig"),
        (["--node-config-label", "no-equals-sign"], "--node-config-label 'no-equals-sign' is not KEY=VALUE"),
        (["--node-config-label", "=x"], "--node-config-label '=x' is not KEY=VALUE"),
    ],
)
def test_run_rejects_bad_node_label_settings(flags: list[str], message: str) -> None:
    result = subprocess.run(
        [*CLI, "run", "--vendors", "simulated", "--plugin-dir", "/tmp/x", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and message in result.stderr
