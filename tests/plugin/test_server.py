"""PluginServer's lifecycle against a real kubelet (the simulator) or a kubelet that hangs in Register.

What is checked: a rebuild that fails is retried and nothing is registered meanwhile; a file squatting
on our socket name is cleared; one kubelet restart, seen twice, costs one rebuild and one Register;
registrations are counted as kubelet saw them; stop is fast even while Register hangs.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from hcs_deviceplugin.kubelet.watch import file_identity
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.server import PluginServer, RegistrationStatus
from hcs_deviceplugin.plugin.sockets import socket_name_for
from tests.plugin.conftest import RESOURCE, WAIT, FakeRegistration, ServerFactory
from tests.waiting import wait_until

STOP_BUDGET = 0.5
"""Generous for a shared 2-core CI box; the target (and what is measured locally) is under 50 ms."""


def kubelet_registrations(kubelet: KubeletSimulator) -> int:
    return sum(1 for r in kubelet.registrations if r.resource_name == RESOURCE and r.accepted)


def restart_kubelet(kubelet: KubeletSimulator, server: PluginServer) -> None:
    """Kubelet restarts: our socket is wiped and kubelet.sock re-created."""
    kubelet.restart()
    assert not server.socket_path.exists()


def test_registers_with_kubelet_and_reports_which_kubelet(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    counts: list[int] = []
    server = make_server(on_registered=counts.append)
    assert server.wait_registered(WAIT)
    status = server.status()
    assert status.status is RegistrationStatus.REGISTERED
    assert status.registered_kubelet == file_identity(kubelet.kubelet_socket)
    assert status.socket == str(server.socket_path)
    assert counts == [1] and kubelet_registrations(kubelet) == 1


def test_kubelet_is_the_only_client_of_a_fresh_socket(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    """The server listens before it registers, so it does not dial itself first: at start, every
    pool's only connection is kubelet's (a self-check cost each pool a connection and a thread)."""
    server = make_server()
    assert server.wait_registered(WAIT)
    wait_until(lambda: server.streaming, what="kubelet's ListAndWatch with its first list")
    assert server.status().open_streams == 1
    assert server.connections_accepted() == 1


def test_a_failed_rebuild_is_retried_and_nothing_is_registered_meanwhile(
    make_server: ServerFactory, kubelet: KubeletSimulator, plugin_dir: Path
) -> None:
    server = make_server()
    assert server.wait_registered(WAIT)
    server.socket_path.unlink()
    server.socket_path.mkdir()  # something we must not remove sits at our socket path
    server.check_socket()
    wait_until(lambda: "directory" in server.status().last_error, what="the rebuild failure is reported")
    assert server.status().status is RegistrationStatus.RETRYING
    assert not server.registered
    assert len(kubelet.registrations) == 1  # no Register was sent with no server behind it
    server.socket_path.rmdir()
    assert server.wait_registered(WAIT)
    assert server.socket_path.is_socket()
    assert len(kubelet.registrations) == kubelet_registrations(kubelet) == 2


def test_a_regular_file_at_our_socket_path_is_removed_and_we_serve_again(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    server = make_server()
    assert server.wait_registered(WAIT)
    server.socket_path.unlink()
    server.socket_path.write_text("not a socket")
    server.check_socket()
    wait_until(lambda: server.registered and server.socket_path.is_socket(), what="served again")
    assert kubelet_registrations(kubelet) == 2


def test_a_live_foreign_server_on_our_socket_is_left_alone_and_reported(
    make_server: ServerFactory, kubelet: KubeletSimulator, plugin_dir: Path
) -> None:
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = plugin_dir / socket_name_for(RESOURCE)
    squatter.bind(str(path))
    squatter.listen()
    try:
        server = make_server()
        wait_until(lambda: "another live process" in server.status().last_error, what="the conflict")
        assert kubelet.registrations == []
        assert path.is_socket()  # not stolen
    finally:
        squatter.close()
    path.unlink()
    assert server.wait_registered(WAIT)


def test_one_kubelet_restart_seen_twice_costs_one_rebuild_and_one_register(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    counts: list[int] = []
    server = make_server(on_registered=counts.append)
    assert server.wait_registered(WAIT)

    # Our socket vanished first (the daemon's periodic check), then kubelet.sock is seen re-created.
    restart_kubelet(kubelet, server)
    server.check_socket()
    assert server.wait_registered(WAIT)
    server.request_restart("kubelet.sock re-created", kubelet_identity=file_identity(kubelet.kubelet_socket))
    assert server.registered and server.status().status is RegistrationStatus.REGISTERED  # nothing queued
    assert (server.status().server_generation, counts) == (2, [1, 2])

    # The other order: kubelet.sock event first; the socket check then finds our fresh socket.
    restart_kubelet(kubelet, server)
    server.request_restart("kubelet.sock re-created", kubelet_identity=file_identity(kubelet.kubelet_socket))
    server.check_socket()
    assert server.wait_registered(WAIT)
    server.check_socket()
    assert server.registered
    assert (server.status().server_generation, counts) == (3, [1, 2, 3])

    # Both while the rebuild is still due: the second folds into it.
    restart_kubelet(kubelet, server)
    server.check_socket()
    server.request_restart("kubelet.sock re-created", kubelet_identity=file_identity(kubelet.kubelet_socket))
    assert server.wait_registered(WAIT)
    assert (server.status().server_generation, counts) == (4, [1, 2, 3, 4])
    assert kubelet_registrations(kubelet) == 4
    assert server.status().registered_kubelet == file_identity(kubelet.kubelet_socket)


def test_with_kubelet_gone_the_server_rebuilds_then_registers_once_kubelet_is_back(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    counts: list[int] = []
    server = make_server(on_registered=counts.append)
    assert server.wait_registered(WAIT)
    kubelet.stop()
    server.socket_path.unlink()  # an operator cleaning up, or a kubelet start that then failed
    server.check_socket()
    wait_until(lambda: "does not exist" in server.status().last_error, what="waiting for kubelet.sock")
    assert server.socket_path.is_socket()  # rebuilt and serving, not registered
    assert not server.registered and server.status().server_generation == 2

    kubelet.start()  # wipes the directory again: the fresh socket is gone before it was registered
    server.request_restart("kubelet.sock re-created", kubelet_identity=file_identity(kubelet.kubelet_socket))
    assert server.wait_registered(WAIT)
    assert server.status().server_generation == 3
    assert counts == [1, 2] and kubelet_registrations(kubelet) == 2


def test_kubelet_sock_appearing_costs_a_register_not_another_rebuild(
    make_server: ServerFactory, plugin_dir: Path
) -> None:
    server = make_server()
    wait_until(lambda: "does not exist" in server.status().last_error, what="waiting for kubelet.sock")
    generation = server.status().server_generation
    fake = FakeRegistration(plugin_dir / "kubelet.sock", hang=False)
    try:
        server.request_restart("kubelet.sock created", kubelet_identity=file_identity(fake_path(plugin_dir)))
        assert server.wait_registered(WAIT)
        assert server.status().server_generation == generation
        assert fake.calls == 1
        server.request_restart("kubelet.sock created", kubelet_identity=file_identity(fake_path(plugin_dir)))
        assert server.registered and fake.calls == 1  # the same kubelet again: nothing to do
    finally:
        fake.close()


def fake_path(plugin_dir: Path) -> Path:
    return plugin_dir / "kubelet.sock"


def test_stop_is_fast_while_register_hangs(
    make_server: ServerFactory, hanging_kubelet: FakeRegistration
) -> None:
    server = make_server()
    assert hanging_kubelet.entered.wait(WAIT)
    started = time.monotonic()
    server.stop()
    took = time.monotonic() - started
    assert took < STOP_BUDGET, f"stop took {took:.3f} s while Register hung"
    assert not server.socket_path.exists()
    assert server.status().status is RegistrationStatus.STOPPED
    assert not server.registered


def test_a_draining_stop_empties_the_stream_first(
    make_server: ServerFactory, kubelet: KubeletSimulator
) -> None:
    server = make_server()
    assert server.wait_registered(WAIT)
    kubelet.wait_for(lambda k: k.resource(RESOURCE).healthy == {"u0", "u1"}, WAIT, "the units")
    server.stop(drain=True)
    kubelet.wait_for(lambda k: k.resource(RESOURCE).capacity == 0, WAIT, "the empty list reached kubelet")
    assert not server.socket_path.exists()


def test_a_register_hanging_on_a_replaced_kubelet_is_cancelled_for_the_new_one(
    make_server: ServerFactory, hanging_kubelet: FakeRegistration, plugin_dir: Path
) -> None:
    server = make_server()
    assert hanging_kubelet.entered.wait(WAIT)  # our Register is stuck inside the old kubelet
    generation = server.status().server_generation
    # The new kubelet.sock replaces the old one by rename, so it is a different inode: identities
    # are (dev, inode, ctime), and a freed inode reused within one clock tick would look the same.
    new_kubelet = FakeRegistration(plugin_dir / "kubelet.new", hang=False)
    (plugin_dir / "kubelet.new").rename(fake_path(plugin_dir))
    try:
        server.request_restart(
            "kubelet.sock re-created", kubelet_identity=file_identity(fake_path(plugin_dir))
        )
        assert server.wait_registered(2.0)  # not after the old kubelet's Register gives up
        assert new_kubelet.calls == 1
        assert server.status().server_generation == generation  # the server we had was fine
        assert server.status().registered_kubelet == file_identity(fake_path(plugin_dir))
    finally:
        new_kubelet.close()
