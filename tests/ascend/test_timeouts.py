"""The per-chip workers that bound DCMI calls: a stuck call times out, blocks only its own key, and clears.

These run the real workers and the real call observer of ``DcmiLibrary`` with Python functions standing
in for the blocking C call (a ``threading.Event`` the test releases), so no timing is guessed: a call is
"stuck" until the test says otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.ascend.backend_harness import Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend import calls
from vendors.ascend.fake import node_910b
from vendors.ascend.library import DcmiError, current_observer, observe_calls
from vendors.ascend.timeouts import CallBounds, CallTimedOut


@pytest.fixture
def bounds() -> Iterator[CallBounds]:
    b = CallBounds(0.2)
    yield b
    b.close()


class Blocking:
    """A stand-in for one C call, observed like library calls are; blocks until released."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        observer = current_observer()
        assert observer is not None, "runs on a worker that observes calls"
        observer.started(self.name)
        self.entered.set()
        try:
            self.release.wait(30)
        finally:
            observer.finished()
        return "done"


def test_a_stuck_call_times_out_naming_the_call(bounds: CallBounds) -> None:
    call = Blocking("dcmi_get_device_health")
    job = bounds.submit("chip-0-0", call)
    with pytest.raises(CallTimedOut, match=r"DCMI call dcmi_get_device_health timed out after 0\.2s"):
        bounds.wait(job)
    assert bounds.stuck("chip-0-0") is not None
    with pytest.raises(CallTimedOut, match="dcmi_get_device_health"):
        bounds.run("chip-0-0", lambda: "queued behind it")  # fails at once, does not queue
    call.release.set()
    assert job.done.wait(5) and job.result == "done"
    assert bounds.run("chip-0-0", lambda: "back") == "back"
    assert bounds.stuck("chip-0-0") is None


def test_a_stuck_key_does_not_block_the_others(bounds: CallBounds) -> None:
    call = Blocking("dcmi_get_device_chip_info")
    job = bounds.submit("chip-0-0", call)
    assert call.entered.wait(5)
    assert bounds.run("chip-1-0", lambda: 42) == 42
    call.release.set()
    assert bounds.wait(job) == "done"


def test_python_work_between_calls_is_not_a_stuck_call(bounds: CallBounds) -> None:
    gate = threading.Event()
    job = bounds.submit("chip-0-0", lambda: gate.wait(30))
    assert bounds.stuck("chip-0-0") is None, "no DCMI call in progress"
    gate.set()
    assert bounds.wait(job) is True


def test_errors_reach_the_waiter_and_callbacks_run(bounds: CallBounds) -> None:
    seen: list[object] = []
    done = threading.Event()

    def fail() -> None:
        raise DcmiError(-8007, "dcmi_get_device_logic_id")

    def on_done(job: object) -> None:
        seen.append(job)
        done.set()

    job = bounds.submit("card-3", fail, on_done)
    with pytest.raises(DcmiError, match="-8007"):
        bounds.wait(job)
    assert done.wait(5) and seen == [job]


def test_calls_on_other_threads_are_not_observed() -> None:
    observe_calls(None)
    assert current_observer() is None


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        CallBounds(0)


def test_closed_workers_take_no_more_jobs() -> None:
    bounds = CallBounds(1)
    assert bounds.run("node", lambda: 1) == 1
    bounds.close()
    with pytest.raises(RuntimeError, match="closed"):
        bounds.run("node", lambda: 2)


def test_real_dcmi_call_is_observed_by_its_worker(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    backend = ascend.backend(node, callTimeoutSeconds="0.2")
    node.control.hang(0, 30)
    bounds = CallBounds(0.2)
    try:
        job = bounds.submit("chip-0-0", lambda: calls.health(backend.library, 0, 0))
        with pytest.raises(CallTimedOut, match=r"DCMI call dcmi_get_device_health timed out after 0\.2s"):
            bounds.wait(job)
        stuck = bounds.stuck("chip-0-0")
        assert stuck is not None and stuck.call == "dcmi_get_device_health"
        node.control.hang(0, 0)
        assert job.done.wait(5) and job.result == 0, "the hung call returns once the hang ends"
        assert bounds.run("chip-0-0", lambda: calls.health(backend.library, 0, 0)) == 0
    finally:
        node.control.hang(0, 0)
        bounds.close()
