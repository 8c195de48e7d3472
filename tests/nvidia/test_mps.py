"""The MPS supervisor against the fake ``nvidia-cuda-mps-control``: starts, limits, restarts, failures, quit.

No NVML here: the supervisor needs only the cards' ids and memory. Waits are bounded conditions on the
health verdicts it reports.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.model import Card, SharingRequest
from vendors.nvidia.mps import PID_FILE, MpsClient, MpsSupervisor, client_for
from vendors.nvidia.mpssettings import MpsSettings

FAKE = Path(__file__).resolve().parents[2] / "vendors" / "nvidia" / "fake" / "nvidia-cuda-mps-control"
CARD = Card(id="GPU-11111111-2222-3333-4444-555555555555", backend="nvidia", vendor="NVIDIA", model="m",
            index=0, memory_bytes=16 << 30)  # fmt: skip
WAIT = 10.0


class Verdicts:
    """The supervisor's health sink: (card, reason or None), in order."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seen: list[tuple[str, str | None]] = []

    def __call__(self, card: str, reason: str | None) -> None:
        with self._cond:
            self.seen.append((card, reason))
            self._cond.notify_all()

    def wait(self, predicate: object, what: str) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self.seen), WAIT), f"{what}: {self.seen}"  # type: ignore[operator]


class Harness:
    def __init__(self, root: Path, control: str = str(FAKE)) -> None:
        self.root = root
        self.stop = threading.Event()
        self.verdicts = Verdicts()
        self.supervisor = MpsSupervisor(
            MpsSettings(control=control, root="/mps", check_seconds=0.05, retry_seconds=0.1),
            root,
            lambda: {CARD.id: CARD},
            self.verdicts,
            self.stop,
        )

    def pipe(self) -> Path:
        return self.root / "mps" / CARD.id / "pipe"

    def log(self) -> str:
        path = self.pipe().parent / "log" / "control.log"
        return path.read_text() if path.exists() else ""

    def pid(self) -> int | None:
        try:
            return int((self.pipe() / PID_FILE).read_text())
        except (OSError, ValueError):
            return None

    def healthy(self) -> None:
        self.verdicts.wait(lambda seen: bool(seen) and seen[-1] == (CARD.id, None), "Healthy")

    def close(self) -> None:
        self.stop.set()
        self.supervisor.join(5.0)
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def harness() -> Iterator[Harness]:
    root = Path(tempfile.mkdtemp(prefix="mps", dir="/tmp"))
    h = Harness(root)
    try:
        yield h
    finally:
        h.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize(
    ("replicas", "memory", "expected"),
    [
        (4, None, MpsClient("/mps/GPU-x/pipe", "/mps/shm", 4096, 25)),
        (3, None, MpsClient("/mps/GPU-x/pipe", "/mps/shm", 5461, 33)),
        (2, 1 << 30, MpsClient("/mps/GPU-x/pipe", "/mps/shm", 1024, 50)),
        (64, None, MpsClient("/mps/GPU-x/pipe", "/mps/shm", 256, 1)),
    ],
)
def test_client_limits(replicas: int, memory: int | None, expected: MpsClient) -> None:
    card = Card(id="GPU-x", backend="nvidia", vendor="NVIDIA", model="m", index=0, memory_bytes=16 << 30)
    assert client_for(card, SharingRequest("GPU-x", "mps", replicas, memory), "/mps/") == expected


def test_a_card_is_unhealthy_until_its_daemon_is_told_the_limits(harness: Harness) -> None:
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4)})
    assert harness.verdicts.seen[0] == (CARD.id, "MPS control daemon starting")
    harness.healthy()
    assert harness.supervisor.client(CARD.id) == client_for(CARD, SharingRequest(CARD.id, "mps", 4), "/mps")
    log = harness.log()
    assert f"CUDA_VISIBLE_DEVICES={CARD.id}" in log
    assert log.index("set_default_device_pinned_mem_limit 0 4096M") < log.index(
        "set_default_active_thread_percentage 25"
    )


def test_new_limits_are_told_to_the_running_daemon_without_a_quit(harness: Harness) -> None:
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4)})
    harness.healthy()
    pid = harness.pid()
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 2, 3 << 30)})
    harness.verdicts.wait(lambda _: "set_default_active_thread_percentage 50" in harness.log(), "re-told")
    assert "set_default_device_pinned_mem_limit 0 3072M" in harness.log()
    assert "quit" not in harness.log() and harness.pid() == pid


def test_a_card_no_longer_shared_gets_quit(harness: Harness) -> None:
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4)})
    harness.healthy()
    harness.supervisor.configure({})
    harness.verdicts.wait(lambda _: harness.pid() is None, "daemon gone")
    assert harness.log().rstrip().endswith("Exit")
    assert harness.supervisor.client(CARD.id) is None


def test_other_modes_are_not_ours(harness: Harness) -> None:
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "something-else", 4)})
    assert harness.verdicts.seen == []
    assert harness.supervisor.client(CARD.id) is None


def test_a_missing_tool_keeps_the_card_unhealthy_with_the_reason_and_retries() -> None:
    root = Path(tempfile.mkdtemp(prefix="mps", dir="/tmp"))
    harness = Harness(root, control=str(root / "no-such-tool"))
    try:
        harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 2)})

        def retried(seen: list[tuple[str, str | None]]) -> bool:
            failures = [r for _, r in seen if r and r.startswith("MPS control daemon failed to start")]
            return len(failures) >= 2

        harness.verdicts.wait(retried, "two failed starts")
        assert (CARD.id, None) not in harness.verdicts.seen
        assert "no-such-tool" in str(harness.verdicts.seen[-1][1])
    finally:
        harness.close()
        shutil.rmtree(root, ignore_errors=True)


def test_a_new_supervisor_adopts_a_running_daemon(harness: Harness) -> None:
    """After a restart of the plugin daemon: the control daemon that outlived it is kept and re-told."""
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4)})
    harness.healthy()
    pid = harness.pid()
    harness.stop.set()
    harness.supervisor.join(5.0)
    again = Harness(harness.root)
    try:
        again.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4)})
        again.healthy()
        assert again.pid() == pid
        assert again.log().count("Starting control daemon") == 1
        assert again.log().count("set_default_active_thread_percentage 25") == 2
    finally:
        again.stop.set()
        again.supervisor.join(5.0)


def test_oversubscribed_limits_are_warned_about(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4, 8 << 30)})
    harness.healthy()
    assert "4 replicas of 8192 MiB are more than its 16384 MiB" in caplog.text


@pytest.mark.parametrize("round_", range(3))
def test_a_killed_daemon_makes_the_card_unhealthy_until_restarted(harness: Harness, round_: int) -> None:
    """Repeated: a SIGKILLed daemon lingers as a zombie until reaped, which neither the supervisor nor
    the fake may take for a live daemon."""
    harness.supervisor.configure({CARD.id: SharingRequest(CARD.id, "mps", 4)})
    harness.healthy()
    old = harness.pid()
    assert old is not None
    count = len(harness.verdicts.seen)
    os.kill(old, signal.SIGKILL)

    def restarted(seen: list[tuple[str, str | None]]) -> bool:
        after = [reason for _, reason in seen[count:]]
        return "MPS control daemon exited; restarting it" in after and after[-1] is None

    harness.verdicts.wait(restarted, "Unhealthy, then Healthy")
    assert harness.pid() not in (None, old)
    assert not [r for _, r in harness.verdicts.seen[count:] if r and "failed to start" in r]
