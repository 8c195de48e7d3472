"""Bounded waits on conditions that have no event of their own to wait on.

Tests never sleep and hope: they poll a cheap predicate until it holds or a bound runs out, and the
bound is far above what a passing run needs, so only a real failure reaches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

WAIT = 10.0


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT, what: str = "") -> None:
    """Poll ``predicate`` every 5 ms until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.005)
