"""Readiness probes for one pool: a real gRPC call on its socket, and a registration that is current."""

from __future__ import annotations

import dataclasses
import socket
import time
from pathlib import Path

from hcs_deviceplugin.kubelet.watch import file_identity
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.probe import pool_serving_problem, probe_pool
from hcs_deviceplugin.plugin.server import RegistrationStatus
from tests.plugin.conftest import WAIT, ServerFactory

PROBE_TIMEOUT = 0.3


def test_a_registered_pool_passes_both_probes(make_server: ServerFactory, kubelet: KubeletSimulator) -> None:
    server = make_server()
    assert server.wait_registered(WAIT)
    assert probe_pool(server.socket_path, PROBE_TIMEOUT) is None
    assert pool_serving_problem(server.status(), file_identity(kubelet.kubelet_socket)) is None


def test_a_socket_that_accepts_but_never_answers_fails_the_probe(plugin_dir: Path) -> None:
    path = plugin_dir / "hcs-mute.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:
        mute.bind(str(path))
        mute.listen()  # connects succeed; no gRPC answer ever comes (a starved or wedged server)
        started = time.monotonic()
        problem = probe_pool(path, PROBE_TIMEOUT)
        took = time.monotonic() - started
    assert problem is not None and "does not answer" in problem
    assert took < PROBE_TIMEOUT + 1.0


def test_a_missing_socket_fails_the_probe(plugin_dir: Path) -> None:
    problem = probe_pool(plugin_dir / "hcs-gone.sock", PROBE_TIMEOUT)
    assert problem is not None and "missing" in problem


def test_a_registration_counts_only_for_the_current_kubelet(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    server = make_server()
    assert server.wait_registered(WAIT)
    status = server.status()
    current = file_identity(kubelet.kubelet_socket)
    assert current is not None
    replaced = (current[0], current[1] + 1, current[2])
    assert "replaced" in (pool_serving_problem(status, replaced) or "")
    assert "missing" in (pool_serving_problem(status, None) or "")
    retrying = dataclasses.replace(status, status=RegistrationStatus.RETRYING, last_error="kubelet said no")
    assert pool_serving_problem(retrying, current) == "registration retrying: kubelet said no"
    assert pool_serving_problem(dataclasses.replace(status, status=RegistrationStatus.STARTING), current)
