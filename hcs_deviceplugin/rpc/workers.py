"""Daemon threads for the unary calls that may wait on I/O (``Unary(blocking=True)``)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Workers:
    """Daemon threads for blocking unary calls, started on first use, at most ``size`` at once.

    Daemon threads, unlike concurrent.futures' pool, never hold up the process's exit behind a
    call still waiting on the network; calls beyond ``size`` wait their turn in the queue.
    """

    def __init__(self, name: str, size: int) -> None:
        self._name = name
        self._size = size
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._stopped = False

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; False once stopped."""
        with self._lock:
            if self._stopped:
                return False
            if self._idle > 0:
                self._idle -= 1  # an idle worker will take it
            elif len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name=f"{self._name}-worker", daemon=True)
                self._threads.append(thread)
                thread.start()
        self._queue.put(job)
        return True

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("%s: worker job failed", self._name)
            with self._lock:
                self._idle += 1

    def stop(self) -> None:
        """Let the workers end once the calls queued before this are done."""
        with self._lock:
            self._stopped = True
            count = len(self._threads)
        for _ in range(count):
            self._queue.put(None)
