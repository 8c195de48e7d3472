"""Every DCMI call bounded in time: one worker thread per chip, so a hung chip blocks only itself.

A DCMI call into a sick chip can block in the driver for minutes (MindX wraps the RoCE health call in
a 1 s timeout for that reason, §2.3). ctypes cannot interrupt a C call, so the only way to keep the
rest of the node responsive is to never make the call on a thread anyone waits for without a bound.
:class:`CallBounds` runs jobs (small functions making one or a few DCMI calls) on a worker per key -
one per chip, one per card for card-wide calls, one for node-wide calls, one for the chip-pair
topology queries - and waits for a job only as
long as its *current DCMI call* is younger than ``call_timeout``. The worker tells us which call it
is in (:func:`library.observe_calls`), so a timeout names it: "DCMI call dcmi_get_device_health
timed out after 5s".

While a worker is stuck in a call past the bound, new jobs for its key fail at once with the same
error instead of queueing behind it, and the chip is Unhealthy (health.py) until the call returns
and the worker answers again. Jobs that were queued but never started when their waiter gave up are
skipped. Workers are daemon threads: a call that never returns cannot keep the process alive.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from vendors.ascend import abi
from vendors.ascend.library import DcmiError, observe_calls

log = logging.getLogger(__name__)

T = TypeVar("T")
NODE_KEY = "node"
TOPOLOGY_KEY = "topology"  # chip-pair queries: they name two chips, so they belong to neither


def chip_key(card_id: int, device_id: int) -> str:
    return f"chip-{card_id}-{device_id}"


def card_key(card_id: int) -> str:
    return f"card-{card_id}"


class CallTimedOut(DcmiError):
    """A DCMI call ran past the bound; the chip's worker is still inside it."""

    def __init__(self, call: str, seconds: float) -> None:
        super().__init__(abi.ERR_TIME_OUT, call)
        self.seconds = seconds
        self.args = (f"DCMI call {call} timed out after {seconds:g}s",)

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class StuckCall:
    """The call a worker has been in for longer than the bound."""

    call: str
    seconds: float


class Job(Generic[T]):
    """One function to run on a worker; its result or exception, and whether anyone still wants it."""

    def __init__(
        self, key: str, function: Callable[[], T], on_done: Callable[[Job[T]], None] | None = None
    ) -> None:
        self.key = key
        self._function = function
        self._on_done = on_done
        self.done = threading.Event()
        self.cancelled = False
        self.result: T | None = None
        self.error: BaseException | None = None
        self.finished_at = 0.0

    def run(self) -> None:
        try:
            self.result = self._function()
        except BaseException as err:  # handed to the waiter, never lost on the worker
            self.error = err
        self.finished_at = time.monotonic()
        self.done.set()
        if self._on_done is not None:
            try:
                self._on_done(self)
            except Exception:
                log.exception("DCMI job callback failed")

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.finished_at = time.monotonic()
        self.done.set()
        if self._on_done is not None:
            self._on_done(self)

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class _Worker:
    """One thread and its queue; records the DCMI call it is in (a :class:`library.CallObserver`)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._jobs: queue.SimpleQueue[Job[object] | None] = queue.SimpleQueue()
        self._current: tuple[str, float] | None = None
        self.thread = threading.Thread(target=self._run, name=f"dcmi-{key}", daemon=True)
        self.thread.start()

    def started(self, call: str) -> None:
        self._current = (call, time.monotonic())

    def finished(self) -> None:
        self._current = None

    def current(self) -> tuple[str, float] | None:
        return self._current

    def put(self, job: Job[object] | None) -> None:
        self._jobs.put(job)

    def _run(self) -> None:
        observe_calls(self)
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if job.cancelled:
                continue
            job.run()


class CallBounds:
    """Workers by key and the bound on a single DCMI call (``call_timeout`` seconds)."""

    def __init__(self, call_timeout: float) -> None:
        if call_timeout <= 0:
            raise ValueError(f"call timeout must be positive, not {call_timeout}")
        self.call_timeout = call_timeout
        self._workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _worker(self, key: str) -> _Worker:
        with self._lock:
            if self._closed:
                raise RuntimeError("DCMI workers are closed")
            worker = self._workers.get(key)
            if worker is None:
                worker = self._workers[key] = _Worker(key)
            return worker

    def stuck(self, key: str) -> StuckCall | None:
        """The call ``key``'s worker has been in for longer than the bound, if any."""
        with self._lock:
            worker = self._workers.get(key)
        if worker is None:
            return None
        current = worker.current()
        if current is None:
            return None
        call, since = current
        elapsed = time.monotonic() - since
        return StuckCall(call, elapsed) if elapsed >= self.call_timeout else None

    def submit(
        self, key: str, function: Callable[[], T], on_done: Callable[[Job[T]], None] | None = None
    ) -> Job[T]:
        """Queue ``function`` on ``key``'s worker; a job for a stuck worker fails at once."""
        job: Job[T] = Job(key, function, on_done)
        stuck = self.stuck(key)
        if stuck is not None:
            job.fail(CallTimedOut(stuck.call, self.call_timeout))
            return job
        self._worker(key).put(job)  # type: ignore[arg-type]
        return job

    def wait(self, job: Job[T]) -> T:
        """The job's result; CallTimedOut as soon as its worker's current call passes the bound."""
        worker = self._workers.get(job.key)
        while not job.done.is_set():
            current = worker.current() if worker is not None else None
            remaining = self.call_timeout
            if current is not None:
                remaining = current[1] + self.call_timeout - time.monotonic()
                if remaining <= 0:
                    job.cancelled = True
                    log.warning("DCMI call %s on %s timed out", current[0], job.key)
                    raise CallTimedOut(current[0], self.call_timeout)
            job.done.wait(max(remaining, 0.001))
        return job.outcome()

    def run(self, key: str, function: Callable[[], T]) -> T:
        """Run ``function`` on ``key``'s worker and wait for it under the bound."""
        return self.wait(self.submit(key, function))

    def close(self) -> None:
        """Let every idle worker end; a worker stuck in C ends when (if) its call returns."""
        with self._lock:
            self._closed = True
            workers = list(self._workers.values())
            self._workers.clear()
        for worker in workers:
            worker.put(None)
