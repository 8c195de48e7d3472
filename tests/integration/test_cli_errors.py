"""Every way ``hcs-deviceplugin run`` can be misconfigured ends in one line on stderr and status 2.

Each case runs the real command in a subprocess, as an operator (or a crash-looping pod) sees it:
the one line ``hcs-deviceplugin: error: ...`` names the flag or variable at fault, and there is
no traceback. A case whose error were not caught would start the daemon and run into the timeout.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import WAIT
from tests.integration.test_cli import free_port, http_get

CLI = [sys.executable, "-m", "hcs_deviceplugin.cli"]
TIMEOUT = 60.0


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without HCS_ variables or an apiserver address, plus ``extra``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HCS_") and not k.startswith("KUBERNETES_")
    }
    return {**env, **extra}


@pytest.fixture
def root() -> Iterator[Path]:
    """A short /tmp directory (socket paths stay under 108 bytes) with an empty pools directory and
    an empty regular file, ``file``."""
    with tempfile.TemporaryDirectory(prefix="hcs", dir="/tmp") as name:
        path = Path(name)
        (path / "pools").mkdir()
        (path / "file").write_text("")
        yield path


def base_args(root: Path) -> list[str]:
    """A valid ``run`` on the simulated backend; each case adds the one thing that is wrong."""
    return [
        "run",
        "--plugin-dir",
        str(root / "dp"),
        "--pools-dir",
        str(root / "pools"),
        "--state-dir",
        str(root / "state"),
        "--vendors",
        "simulated",
        "--pod-resources-socket",
        str(root / "none.sock"),
        "--metrics-address",
        "127.0.0.1",
        "--metrics-port",
        "0",
    ]


def refused(args: list[str], env: dict[str, str] | None = None) -> str:
    """Run the CLI, assert it refused with one error line and status 2; return that line."""
    result = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=clean_environment(**(env or {})),
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hcs-deviceplugin: error: "), lines[0]
    return lines[0]


Case = Callable[[Path], tuple[list[str], dict[str, str], str]]

CASES: dict[str, Case] = {
    "bad --log-level": lambda r: (["--log-level", "loud"], {}, "--log-level: 'loud' is not a log level"),
    "bad HCS_LOG_LEVEL": lambda r: ([], {"HCS_LOG_LEVEL": "loud"}, "HCS_LOG_LEVEL='loud'"),
    "--in-cluster outside a cluster": lambda r: (
        ["--in-cluster", "--kube-namespace", "ns"],
        {},
        "--in-cluster: no service account to load",
    ),
    "missing --kubeconfig": lambda r: (
        ["--kubeconfig", str(r / "missing"), "--kube-namespace", "ns"],
        {},
        f"--kubeconfig {r / 'missing'}: no such file",
    ),
    "empty --kubeconfig": lambda r: (
        ["--kubeconfig", str(r / "file"), "--kube-namespace", "ns"],
        {},
        f"--kubeconfig {r / 'file'}: cannot load it: Invalid kube-config",
    ),
    "--kubeconfig is a directory": lambda r: (
        ["--kubeconfig", str(r / "pools"), "--kube-namespace", "ns"],
        {},
        f"--kubeconfig {r / 'pools'}: not a file",
    ),
    "--in-cluster and --kubeconfig": lambda r: (
        ["--in-cluster", "--kubeconfig", str(r / "k"), "--kube-namespace", "ns"],
        {},
        "--in-cluster and --kubeconfig: give one",
    ),
    "mistyped --pools-dir": lambda r: (
        ["--pools-dir", str(r / "pool")],
        {},
        f"--pools-dir {r / 'pool'}: no such directory",
    ),
    "--pools-dir is a file": lambda r: (
        ["--pools-dir", str(r / "file")],
        {},
        f"--pools-dir {r / 'file'}: not a directory",
    ),
    "unknown backend option key": lambda r: (
        ["--backend-option", "simulated.nod=x"],
        {},
        "--backend-option: simulated backend: unknown option(s) nod",
    ),
    "backend option for no such backend": lambda r: (
        ["--backend-option", "simulatd.node=x"],
        {},
        "--backend-option names simulatd: no such backend",
    ),
    "malformed backend option": lambda r: (
        ["--backend-option", "simulated"],
        {},
        "--backend-option 'simulated': expected NAME.KEY=VALUE",
    ),
    "--metrics-port out of range": lambda r: (
        ["--metrics-port", "70000"],
        {},
        "--metrics-port: 70000 is not a port number",
    ),
    "zero --pod-resources-interval": lambda r: (
        ["--pod-resources-interval", "0"],
        {},
        "--pod-resources-interval: '0': must be above 0 seconds",
    ),
    "nan --allocation-settle-seconds": lambda r: (
        ["--allocation-settle-seconds", "nan"],
        {},
        "--allocation-settle-seconds: 'nan' is not a number of seconds (0 or more)",
    ),
    "mistyped HCS_POOLS_DIR": lambda r: (
        ["--pools-dir", str(r / "pool")],
        {"HCS_POOLS_DIR": str(r / "pools")},
        f"--pools-dir {r / 'pool'}: no such directory",
    ),
    "HCS_IN_CLUSTER with --kubeconfig": lambda r: (
        ["--kubeconfig", str(r / "file"), "--kube-namespace", "ns"],
        {"HCS_IN_CLUSTER": "on"},
        "--in-cluster (HCS_IN_CLUSTER) and --kubeconfig: give one",
    ),
    "bad HCS_METRICS_PORT": lambda r: ([], {"HCS_METRICS_PORT": "http"}, "HCS_METRICS_PORT='http'"),
    "bad HCS_IN_CLUSTER": lambda r: (
        [],
        {"HCS_IN_CLUSTER": "maybe"},
        "HCS_IN_CLUSTER='maybe': expected true",
    ),
    "unknown vendor": lambda r: (["--vendors", "nope"], {}, "--vendors: unknown vendors ['nope']"),
    "--dra-driver without the API": lambda r: (
        ["--dra-driver", "gpu.deckhouse.io"],
        {},
        "--dra-driver needs --in-cluster or --kubeconfig",
    ),
    "HCS_DRA_DRIVER not a DNS subdomain": lambda r: (
        ["--kubeconfig", str(r / "file"), "--kube-namespace", "ns"],
        {"HCS_DRA_DRIVER": "GPU_driver"},
        "--dra-driver (HCS_DRA_DRIVER) 'GPU_driver' is not a DNS subdomain",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_refuses_in_one_line(case: str, root: Path) -> None:
    args, env, expected = CASES[case](root)
    line = refused([*base_args(root), *args], env)
    assert expected in line, line


def test_a_start_error_names_the_variable_the_value_came_from(root: Path) -> None:
    args = base_args(root)
    del args[args.index("--pools-dir") : args.index("--pools-dir") + 2]
    line = refused(args, {"HCS_POOLS_DIR": str(root / "pool")})
    assert f"--pools-dir (HCS_POOLS_DIR) {root / 'pool'}: no such directory" in line, line


def test_mistyped_pools_dir_is_not_created(root: Path) -> None:
    refused([*base_args(root), "--pools-dir", str(root / "pool")])
    assert not (root / "pool").exists()
    assert not (root / "dp").exists(), "nothing started before the refusal"


def test_busy_metrics_port_is_refused_before_anything_is_served(root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused([*base_args(root), "--metrics-port", str(port)])
    assert f"--metrics-address/--metrics-port 127.0.0.1:{port}: cannot listen" in line, line
    assert "in use" in line, line
    assert not (root / "dp").exists(), "the plugin dir was not touched"


def test_simulate_refuses_a_missing_node_file(root: Path) -> None:
    line = refused(["simulate", "--once", "--node", str(root / "node.yaml")])
    assert f"--node: simulated node description {root / 'node.yaml'}: cannot read" in line, line


def test_validate_config_reports_a_huge_integer_with_its_line(tmp_path: Path) -> None:
    """Python refuses to convert an integer of over 4,300 digits; that is a config error, not a crash."""
    path = tmp_path / "pools.yaml"
    path.write_text("version: v1\npools:\n  - name: a\n    slicesPerUnit: " + "9" * 5000 + "\n")
    result = subprocess.run(
        [*CLI, "validate-config", str(path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=clean_environment(),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert f"{path}: <document>: invalid YAML at line 4, column 20: integer of 5000" in result.stdout


def test_every_backend_absent_is_not_ready_and_says_why(root: Path) -> None:
    """The daemon starts (absence is the node's state, not a mistake) but is not Ready, with the reason."""
    port = free_port()
    args = base_args(root)
    args[args.index("--metrics-port") + 1] = str(port)
    missing = root / "no-node.yaml"
    proc = subprocess.Popen(
        [*CLI, *args, "--backend-option", f"simulated.node={missing}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_environment(),
    )
    try:
        status, body = _wait_for_answer(f"http://127.0.0.1:{port}/readyz", proc)
        assert status == 503, body
        assert "backends: none running, every enabled one is absent: simulated (" in body, body
        assert str(missing) in body, body
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def _wait_for_answer(url: str, proc: subprocess.Popen[str]) -> tuple[int, str]:
    """The first answer of ``url`` once the daemon has started serving HTTP (bounded wait)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            status, body = http_get(url)
        except OSError:
            time.sleep(0.05)  # not listening yet: poll the condition again
            continue
        if "discovering" not in body and "waiting for the lock" not in body:
            return status, body
        time.sleep(0.05)
    raise AssertionError(f"{url} did not answer within {WAIT}s")
