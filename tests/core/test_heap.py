"""Once the pools stream, start-up's garbage is collected and the survivors frozen, and until then
``run`` lets the collector wait (hcs_deviceplugin.heap).

In child interpreters: freezing and disabling are process-wide, and this test process must keep
collecting."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hcs_deviceplugin import cli
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import H100, WAIT, card_pool, end_daemon_run, pool_doc, resource
from tests.integration.test_cli import free_port


def child_says_ok(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (freezing and disabling collection are process-wide) and
    check that it got to its last line, ``print("ok")``; its output, for what it logged."""
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    return out


PROBE = """
import gc, threading, weakref
from hcs_deviceplugin.heap import settle_when

calls = []
def ready(timeout):
    calls.append(timeout)
    return True

class Cycle:
    def __init__(self): self.me = self

prepared = []
def prepare():
    prepared.append((len(calls), gc.get_freeze_count()))  # after ready, before the freeze

garbage = weakref.ref(Cycle())  # start-up garbage: collected before the freeze, not kept by it
assert gc.get_freeze_count() == 0
settle_when(ready, threading.Event(), prepare).join(10)
frozen = gc.get_freeze_count()
assert calls and frozen > 1000, (calls, frozen)
assert prepared == [(1, 0)], prepared
assert garbage() is None
stopped = threading.Event(); stopped.set()
gc.unfreeze()
settle_when(ready, stopped, prepare).join(10)
# A daemon stopping before its pools stream settles nothing, but stands down: start-up's heap is
# frozen, so that the first pass once collection is back on does not walk it.
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
assert len(prepared) == 1  # and prepares nothing
print("ok")
"""


def test_settle_collects_then_freezes_once_ready_and_not_when_stopping() -> None:
    child_says_ok(PROBE)


DEFER_PROBE = """
import gc, threading
from hcs_deviceplugin.heap import defer_collection, settle_when

defer_collection()
assert not gc.isenabled()
settle_when(lambda timeout: True, threading.Event()).join(10)
assert gc.isenabled()  # the one collection done, collecting as usual again
defer_collection()
stopped = threading.Event(); stopped.set()
settle_when(lambda timeout: True, stopped).join(10)
assert gc.isenabled()  # a daemon stopping before its pools stream collects as usual too
print("ok")
"""


def test_collection_deferred_until_settled_or_stopping() -> None:
    child_says_ok(DEFER_PROBE)


WATCHED_RUN = """
import gc, importlib, os, sys
log = open(os.environ["GC_LOG"], "a", buffering=1)
entry, marker = os.environ["GC_ENTRY"], os.environ["GC_MARKER"]

def seen(phase, info):
    if phase == "start":
        log.write(f"{info['generation']}:{int(marker in sys.modules)}\\n")
        if info["generation"] == 2:
            log.write(f"search:{int('hcs_deviceplugin.allocator' in sys.modules)}\\n")

gc.callbacks.append(seen)
sys.exit(importlib.import_module(entry).main())
"""
"""``hcs-deviceplugin run`` through ``$GC_ENTRY``'s ``main`` with every collection written to
``$GC_LOG`` in order, as ``generation:loaded`` (``loaded`` 1 once ``$GC_MARKER`` is being loaded;
a full one followed by ``search:loaded`` for the allocator's search);
``gc.callbacks`` is the interpreter's own hook: nothing of ours is replaced."""


@pytest.mark.parametrize(
    ("entry", "marker"),
    [
        pytest.param("hcs_deviceplugin.__main__", "hcs_deviceplugin.cli", id="console-script"),
        pytest.param("hcs_deviceplugin.cli", "hcs_deviceplugin.runner", id="python-m-cli"),
    ],
)
def test_a_run_daemon_collects_nothing_until_its_pools_stream(
    tmp_path: Path, entry: str, marker: str
) -> None:
    """Start-up's objects live as long as the daemon: once the console script loads the command
    line (or ``cli.main`` loads the daemon's code), the collector's first pass is settle's full one,
    after the pools stream."""
    root = Path(tempfile.mkdtemp(prefix="hcsg", dir="/tmp"))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    write_configmap_volume(root / "pools", {"pools.yaml": pool_doc(card_pool("train", *H100[:2]))})
    gc_log = tmp_path / "gc.log"
    command = [sys.executable, "-c", WATCHED_RUN, "run", "--vendors", "simulated", "--node-name", "node-1"]
    command += ["--plugin-dir", str(root / "dp"), "--pools-dir", str(root / "pools")]
    command += ["--cdi-dir", str(root / "cdi"), "--state-dir", str(root / "state")]
    command += ["--metrics-address", "127.0.0.1", "--metrics-port", str(free_port())]
    command += ["--pod-resources-socket", str(root / "pr.sock")]
    env = {**os.environ, "HCS_SIMULATED_NODE": "builtin:default", "GC_LOG": str(gc_log)}
    env |= {"GC_ENTRY": entry, "GC_MARKER": marker}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        name = resource("train")
        kubelet.wait_for(lambda k: name in k.resources() and k.resource(name).connected, WAIT, "streaming")
        kubelet.wait_for(lambda k: "2:1" in gc_log.read_text().split(), WAIT, "start-up settled")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, stderr[-2000:]
    finally:
        end_daemon_run(proc, kubelet, root)
    passes = gc_log.read_text().split()
    before_settling = passes[: passes.index("2:1")]
    assert [p for p in before_settling if p.endswith(":1") and not p.startswith("search")] == []
    # the search is loaded once the pools stream, before the freeze: not by kubelet's first call
    assert passes[passes.index("2:1") + 1] == "search:1"


def test_a_refused_start_collects_as_usual_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "configure_logging", lambda *_args: None)  # keep pytest's logging
    assert gc.isenabled()
    assert cli.main(["run", "--vendors=simulated", "--node-labels"]) == 2
    assert "--node-labels needs --in-cluster or --kubeconfig" in capsys.readouterr().err
    assert gc.isenabled()


OTHER_COMMAND = """
import gc, sys
sys.argv = ["hcs-deviceplugin", "validate-config", sys.argv[1]]
from hcs_deviceplugin.__main__ import main
status = main()
print(status, gc.isenabled())
"""


def test_any_other_command_collects_as_usual_once_its_command_line_is_read(tmp_path: Path) -> None:
    document = tmp_path / "pools.yaml"
    document.write_text(pool_doc(card_pool("train", *H100[:2])))
    out = subprocess.run(
        [sys.executable, "-c", OTHER_COMMAND, str(document)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "0 True"


FAILED_PREPARE_PROBE = """
import gc, threading
from hcs_deviceplugin.heap import defer_collection, settle_when

def prepare():
    raise RuntimeError("an allocator bug")

defer_collection()
settle_when(lambda timeout: True, threading.Event(), prepare).join(10)
assert gc.isenabled() and gc.get_freeze_count() > 1000, gc.get_freeze_count()
print("ok")
"""


def test_a_failed_preparation_still_settles_and_collects_again() -> None:
    """What ``prepare`` does (the allocator, the pools' topologies) is left for the first calls if it
    fails; collection must come back on all the same, or the daemon would never collect again."""
    out = child_says_ok(FAILED_PREPARE_PROBE)
    assert "preparing for the first calls after the start failed" in out.stderr


STOPPED_WHILE_PREPARING_PROBE = """
import gc, threading
from hcs_deviceplugin.heap import defer_collection, settle_when

collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
stop = threading.Event()

def prepare():
    stop.set()  # SIGTERM arrives while the allocator loads and the topologies are built

defer_collection()
settle_when(lambda timeout: True, stop, prepare).join(10)
assert collections == [], collections  # no collection for an exit
# Collecting again, but start-up's objects, all still in the youngest generation, are frozen: the
# first pass from here does not walk them all (a pass as long as the full one skipped).
assert gc.isenabled() and gc.get_freeze_count() > 1000, gc.get_freeze_count()
print("ok")
"""


def test_a_stop_while_preparing_skips_the_collection() -> None:
    """The one full collection holds the interpreter lock for tens of milliseconds; a SIGTERM that
    came while the pools' topologies were being built must not wait behind it, nor behind the first
    young-generation pass once collection is back on, which would walk the same objects."""
    child_says_ok(STOPPED_WHILE_PREPARING_PROBE)


FAILED_READY_PROBE = """
import gc, threading
from hcs_deviceplugin.heap import defer_collection, settle_when

def ready(timeout):
    raise RuntimeError("a bug in the wait for the pools to stream")

defer_collection()
settle_when(ready, threading.Event()).join(10)
assert gc.isenabled(), "collection left off for good"
print("ok")
"""


def test_a_failed_wait_for_streaming_still_turns_collection_back_on() -> None:
    """The settle thread is the only thing that turns collection back on in a run: whatever fails
    on it, the wait for the pools included, must not leave the daemon never collecting again."""
    out = child_says_ok(FAILED_READY_PROBE)
    assert "waiting for the pools to stream failed" in out.stderr
