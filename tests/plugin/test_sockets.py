"""prepare_socket_path: what may be at our socket path before we bind, and what happens to it."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.plugin.sockets import (
    SocketInUseError,
    is_socket,
    prepare_socket_path,
    socket_answers,
    socket_name_for,
)


@pytest.fixture
def path(plugin_dir: Path) -> Path:
    return plugin_dir / socket_name_for("hcs.example.com/a")


@pytest.fixture
def listener(path: Path) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
        s.listen()
        yield s


def test_nothing_there_is_fine(path: Path) -> None:
    prepare_socket_path(path)
    assert not path.exists()


def test_a_stale_socket_is_removed(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))  # bound, never listening: nobody answers
    assert is_socket(path) and not socket_answers(path)
    prepare_socket_path(path)
    assert not path.exists()


def test_a_live_server_is_refused_and_kept(path: Path, listener: socket.socket) -> None:
    with pytest.raises(SocketInUseError, match="another live process"):
        prepare_socket_path(path)
    assert socket_answers(path)


def test_a_regular_file_is_removed_with_a_warning(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path.write_text("left here by someone")
    with caplog.at_level(logging.WARNING):
        prepare_socket_path(path)
    assert not path.exists()
    assert any(path.name in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_link_is_removed_but_not_its_target(path: Path, plugin_dir: Path) -> None:
    target = plugin_dir / "precious"
    target.write_text("keep me")
    path.symlink_to(target)
    prepare_socket_path(path)
    assert not path.is_symlink() and target.read_text() == "keep me"
    path.symlink_to(plugin_dir / "nowhere")  # dangling
    prepare_socket_path(path)
    assert not path.is_symlink()


def test_a_directory_is_refused_and_kept(path: Path) -> None:
    path.mkdir()
    with pytest.raises(SocketInUseError, match="directory"):
        prepare_socket_path(path)
    assert path.is_dir()


def test_a_path_too_long_for_a_unix_socket_is_refused(plugin_dir: Path) -> None:
    with pytest.raises(ValueError, match="too long"):
        prepare_socket_path(plugin_dir / ("x" * 120))


def test_socket_names_are_ours_and_bounded() -> None:
    assert socket_name_for("hcs.example.com/a") == "hcs-hcs.example.com_a.sock"
    long_name = socket_name_for("hcs.example.com/" + "p" * 200)
    assert long_name.startswith("hcs-") and long_name.endswith(".sock") and len(long_name) <= 80
