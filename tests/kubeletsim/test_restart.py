"""Kubelet restarts: socket wipe, checkpointed allocations, stopped endpoints until re-registration."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from hcs_deviceplugin.kubeletsim import KubeletSimulator
from tests.kubeletsim.conftest import RESOURCE, PluginFactory, SimFactory, registered
from tests.kubeletsim.fakeplugin import FakePlugin, devices


def _is_socket(path: Path) -> bool:
    return path.exists() and stat.S_ISSOCK(path.stat().st_mode)


def _ready(sim: KubeletSimulator, make_plugin: PluginFactory) -> FakePlugin:
    plugin = make_plugin(initial=devices("d0", "d1", "d2"))
    registered(sim, plugin)
    return plugin


def test_restart_wipes_sockets_but_keeps_other_files(
    sim: KubeletSimulator, make_plugin: PluginFactory, sock_dir: Path
) -> None:
    plugin = _ready(sim, make_plugin)
    keep = sim.plugin_dir / "keep.txt"
    keep.write_text("not a socket")
    (sim.plugin_dir / "subdir").mkdir()
    stray = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stray.bind(str(sim.plugin_dir / "stray.sock"))
    try:
        old_kubelet_sock = sock_dir / "old-kubelet.sock"  # a second link pins the old inode
        os.link(sim.kubelet_socket, old_kubelet_sock)
        sim.restart()
    finally:
        stray.close()

    assert not plugin.socket_path.exists()
    assert not (sim.plugin_dir / "stray.sock").exists()
    assert keep.read_text() == "not a socket"
    assert (sim.plugin_dir / "subdir").is_dir()
    assert _is_socket(sim.kubelet_socket)
    assert sim.kubelet_socket.stat().st_ino != old_kubelet_sock.stat().st_ino  # re-created, not kept
    assert sim.checkpoint_path.is_file()


def test_restart_cancels_the_old_kubelets_streams(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = _ready(sim, make_plugin)
    sim.restart()
    plugin.wait_open_streams(0)
    assert sim.resource(RESOURCE).stream_ends == 0  # the old kubelet's ends are not this kubelet's events


def test_restart_leaves_stopped_endpoints_until_the_plugin_returns(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin)
    sim.restart()

    view = sim.resource(RESOURCE)
    assert not view.connected and view.stopped_at is not None
    assert view.capacity == 0 and view.options is None and view.endpoint == ""

    plugin.rebind()
    registered(sim, plugin)
    view = sim.resource(RESOURCE)
    assert view.connected and view.healthy == {"d0", "d1", "d2"}
    assert view.registrations == 2  # cumulative across the restart


def test_allocations_survive_restart_without_new_allocate_calls(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin)
    held = sim.allocate("pod-a", "main", RESOURCE, 2)
    sim.restart()

    assert sim.allocations() == [held]
    plugin.rebind()
    registered(sim, plugin)
    assert sim.allocate("pod-a", "main", RESOURCE, 2) == held
    assert len(plugin.allocate_requests) == 1
    assert sim.allocate("pod-b", "main", RESOURCE, 1).device_ids == ("d2",)  # held IDs stay taken


def test_checkpoint_is_kubelets_layout(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    _ready(sim, make_plugin)
    record = sim.allocate("pod-a", "main", RESOURCE, 2, namespace="ns")
    document = json.loads(sim.checkpoint_path.read_text())

    [entry] = document["Data"]["PodDeviceEntries"]
    assert entry["PodUID"] == record.pod_uid
    assert (entry["ContainerName"], entry["ResourceName"]) == ("main", RESOURCE)
    assert entry["DeviceIDs"] == {"-1": ["d0", "d1"]}
    assert isinstance(entry["AllocResp"], str)
    assert document["Data"]["RegisteredDevices"] == {RESOURCE: ["d0", "d1", "d2"]}
    assert isinstance(document["Checksum"], int)


def test_a_new_simulator_reads_the_previous_ones_checkpoint(
    sim: KubeletSimulator, sim_factory: SimFactory, make_plugin: PluginFactory
) -> None:
    _ready(sim, make_plugin)
    held = sim.allocate("pod-a", "main", RESOURCE, 1)
    sim.stop()

    successor = sim_factory()
    assert successor.allocations() == [held]
    assert RESOURCE in successor.resources() and not successor.resource(RESOURCE).connected


def test_corrupt_checkpoint_is_ignored_like_kubelet(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    _ready(sim, make_plugin)
    sim.allocate("pod-a", "main", RESOURCE, 1)
    sim.stop()
    sim.checkpoint_path.write_text('{"Data": {}, "Checksum": 1}')
    sim.start()

    assert sim.checkpoint_error is not None and "checksum" in sim.checkpoint_error
    assert sim.allocations() == [] and sim.resources() == {}


def test_unreturned_plugin_is_dropped_after_grace(
    sim_factory: SimFactory, make_plugin: PluginFactory
) -> None:
    sim = sim_factory(grace_period=0.3)
    _ready(sim, make_plugin)
    sim.restart()
    assert RESOURCE in sim.resources()
    sim.wait_for(lambda s: RESOURCE not in s.resources(), timeout=5.0, what="grace expiry")
    assert RESOURCE not in json.loads(sim.checkpoint_path.read_text())["Data"]["RegisteredDevices"]


def test_twenty_restarts_in_a_row_are_clean(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    """How long a restart takes, the reliability bench prints (simulated kubelet restart)."""
    plugin = _ready(sim, make_plugin)
    held = sim.allocate("pod-a", "main", RESOURCE, 1)
    for _ in range(20):
        sim.restart()
        plugin.rebind()
        registered(sim, plugin)
        plugin.wait_open_streams(1)

    view = sim.resource(RESOURCE)
    assert (view.registrations, view.stream_opens, view.stream_ends) == (21, 21, 0)
    assert view.healthy == {"d0", "d1", "d2"}
    assert sim.allocations() == [held]
    assert len(plugin.allocate_requests) == 1


def test_start_twice_is_an_error_and_stop_is_idempotent(sim: KubeletSimulator) -> None:
    with pytest.raises(RuntimeError):
        sim.start()
    sim.stop()
    sim.stop()
    assert not sim.kubelet_socket.exists()
    assert not sim.running
