"""PoolState: versions move only when the advertised list changes, and delivery can be awaited."""

from __future__ import annotations

import threading

from hcs_deviceplugin.plugin.state import MAX_ANSWERS, MAX_KEY_BYTES, Answer, PoolState
from hcs_deviceplugin.rpc.calls import Encoded
from tests.plugin.conftest import WAIT, pool, units


def test_version_bumps_only_when_units_change() -> None:
    state = PoolState(pool(), units("u0"))
    assert state.snapshot.version == 0
    assert state.update(pool(), units("u0", "u1"))
    assert state.snapshot.version == 1
    assert not state.update(pool(), units("u0", "u1"))  # identical: no message storm for kubelet
    assert state.snapshot.version == 1
    assert state.update(pool(), units("u0", "u1", unhealthy=["u1"]))  # a health change is a change
    assert state.snapshot.version == 2


def test_pool_change_without_unit_change_is_kept_but_not_announced() -> None:
    state = PoolState(pool(), units("u0"))
    moved = pool().__class__(name="a", resource_name=pool().resource_name, replica_placement="pack")
    assert not state.update(moved, units("u0"))
    assert state.snapshot.version == 0
    assert state.snapshot.pool.replica_placement == "pack"


def test_wait_for_change_returns_the_new_snapshot_or_none_on_stop() -> None:
    state = PoolState(pool(), units("u0"))
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(state.wait_for_change(0, lambda: False)))
    waiter.start()
    state.update(pool(), units("u1"))
    waiter.join(WAIT)
    [snapshot] = got
    assert snapshot is not None and [u.id for u in snapshot.units] == ["u1"]  # type: ignore[attr-defined]
    assert state.wait_for_change(1, lambda: True) is None


def test_wait_delivered_waits_for_a_stream_to_hand_over_the_version() -> None:
    state = PoolState(pool(), units("u0"))
    assert not state.wait_delivered(0, timeout=0.01)
    state.update(pool(), units("u1"))
    done = threading.Event()

    def wait() -> None:
        if state.wait_delivered(1, WAIT):
            done.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    state.note_delivered(0)
    assert not done.wait(0.05)  # an older version does not satisfy the wait
    state.note_delivered(1)
    waiter.join(WAIT)
    assert done.is_set()
    state.note_delivered(0)  # versions only move forward
    assert state.wait_delivered(1, timeout=0)


def test_a_full_answer_book_starts_over_rather_than_growing() -> None:
    snapshot = PoolState(pool(), units("u0")).snapshot
    for n in range(MAX_ANSWERS):
        snapshot.remember(f"request {n}".encode(), Answer(((f"id{n}",),), Encoded(b"")))
    assert len(snapshot.answers) == MAX_ANSWERS
    snapshot.remember(b"one more", Answer((("u0",),), Encoded(b"\x0a\x00")))
    [(request, kept)] = snapshot.answers.items()
    assert (request, kept.containers, kept.response.SerializeToString()) == (
        b"one more",
        (("u0",),),
        b"\x0a\x00",
    )


def test_a_request_too_long_to_keep_is_not_remembered() -> None:
    """A client's oversized request is answered but does not grow the book past its bound."""
    snapshot = PoolState(pool(), units("u0")).snapshot
    snapshot.remember(b"x" * MAX_KEY_BYTES, Answer((("u0",),), Encoded(b"")))
    snapshot.remember(b"x" * (MAX_KEY_BYTES + 1), Answer((("u0",),), Encoded(b"")))
    assert list(snapshot.answers) == [b"x" * MAX_KEY_BYTES]
