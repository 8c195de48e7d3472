"""LazyEvent: the flag behind a call's cancellation and a stream's room to queue."""

from __future__ import annotations

import threading

from hcs_deviceplugin.rpc.calls import CallContext, LazyEvent
from tests.rpc.conftest import WAIT
from tests.waiting import wait_until


def test_set_clear_and_wait_without_a_waiter_build_no_event() -> None:
    flag = LazyEvent()
    assert not flag.is_set() and not flag.wait(0.0)
    flag.set()
    assert flag.is_set() and flag.wait(0.0)
    flag.clear()
    assert not flag.is_set()
    assert LazyEvent(is_set=True).wait(0.0)
    unwaited = LazyEvent()
    unwaited.set()
    assert unwaited._event is None  # nobody waited: no lock or condition was built


def test_a_waiter_wakes_when_another_thread_sets_it() -> None:
    flag = LazyEvent()
    woke = threading.Event()

    def wait() -> None:
        if flag.wait(WAIT):
            woke.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_until(lambda: flag._event is not None, what="the waiter built its event")
    flag.set()
    assert woke.wait(WAIT)
    waiter.join(WAIT)


def test_a_context_cancelled_elsewhere_wakes_its_waiter_and_runs_its_callbacks() -> None:
    context = CallContext("/t.T/Stream")
    ran: list[str] = []
    context.add_callback(lambda: ran.append("callback"))
    threading.Timer(0.01, context.cancel).start()
    assert context.wait_cancelled(WAIT)
    assert context.cancelled and not context.is_active()
    assert ran == ["callback"]
