"""One daemon per plugin directory: the second instance waits for the first to let go."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from hcs_deviceplugin.kubelet.dirlock import PluginDirLock

HOLD = """
import sys, threading
from pathlib import Path
from hcs_deviceplugin.kubelet.dirlock import PluginDirLock
lock = PluginDirLock(Path(sys.argv[1]))
assert lock.acquire(threading.Event())
print("held", flush=True)
sys.stdin.readline()
"""


def test_second_instance_waits_until_the_holder_exits_even_by_kill(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = PluginDirLock(tmp_path)
        got: list[bool] = []
        stop = threading.Event()
        waiter = threading.Thread(target=lambda: got.append(second.acquire(stop, poll=0.01)))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and not second.held  # still waiting while the first lives
        holder.kill()
        waiter.join(10)
        assert got == [True] and second.held
        assert (tmp_path / ".hcs-deviceplugin.lock").read_text().strip().isdigit()
        second.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_waiting_instance_gives_up_when_stopped(tmp_path: Path) -> None:
    first = PluginDirLock(tmp_path)
    assert first.acquire(threading.Event())
    stop = threading.Event()
    stop.set()
    assert not PluginDirLock(tmp_path).acquire(stop, poll=0.01)
    first.release()
    assert PluginDirLock(tmp_path).acquire(threading.Event())


def test_the_holder_locks_a_new_file_after_the_directory_is_wiped(tmp_path: Path) -> None:
    plugin_dir = tmp_path / "dp"
    first = PluginDirLock(plugin_dir)
    assert first.acquire(threading.Event())
    (plugin_dir / ".hcs-deviceplugin.lock").unlink()
    plugin_dir.rmdir()
    plugin_dir.mkdir()
    first.ensure()
    stop = threading.Event()
    stop.set()
    assert not PluginDirLock(plugin_dir).acquire(stop, poll=0.01), "a later instance must still wait"
    first.release()
