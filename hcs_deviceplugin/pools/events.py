"""Kubernetes Events for pool configuration errors, on the ConfigMap that has the error.

Logs are read on the node; the people who write pool ConfigMaps look at the ConfigMap
(``kubectl describe configmap``), so a broken pool config is reported there too, as a Warning Event
with reason ``InvalidPoolConfig``. ``kubectl describe`` finds Events by the object's uid as well as its
name, so the reference carries the uid when it is known (the API source knows it; see
:meth:`ApiConfigMapSource.uid_of`).

Three choices, each for the daemon's sake:

* **Never in the way.** :meth:`EventRecorder.config_error` only queues; a worker thread talks to the
  API. A config error is found on the apply path, and an apiserver that is slow or down must not
  delay applying the next good config. Failures are logged, never raised; when the queue is full
  (the API has been unreachable for a while) new reports are dropped and logged.
* **No event storms.** The same message for the same object (same uid) does not create a new Event:
  the first one is patched, ``count`` + 1 and ``lastTimestamp`` now, as client-go's correlator does,
  so ``kubectl describe`` shows "(x5 over 20m)". If the Event is gone meanwhile (Events expire, an hour
  by default) a new one is created. A different message, or the object recreated (new uid), is a new
  Event.
* **Within the API's limits.** The message is cut to 1024 bytes of UTF-8 (the limit the Events API
  documents for a note); the Event lives in the ConfigMap's namespace, which the apiserver requires.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from hcs_deviceplugin.kubeapi.client import ApiError, KubeClient
from hcs_deviceplugin.kubeapi.paths import path_of
from hcs_deviceplugin.pools.objects import ConfigMapObject

__all__ = ["REASON_INVALID_POOL_CONFIG", "EventRecorder", "truncate_message"]

_LOG = logging.getLogger(__name__)

REASON_INVALID_POOL_CONFIG = "InvalidPoolConfig"
MAX_MESSAGE_BYTES = 1024
_MAX_NAME = 253
_MAX_REPORTING_INSTANCE = 128
_CACHE_SIZE = 1024
"""Objects × messages remembered for de-duplication; the oldest is forgotten first."""
_QUEUE_SIZE = 256
_REQUEST_TIMEOUT = (5.0, 10.0)
_HTTP_NOT_FOUND = 404


def truncate_message(message: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """``message`` cut to at most ``limit`` bytes of UTF-8, marked with "..." when cut."""
    data = message.encode("utf-8")
    if len(data) <= limit:
        return message
    return data[: limit - 3].decode("utf-8", errors="ignore") + "..."


def _timestamp(now: datetime) -> str:
    """RFC 3339 to the second, as metav1.Time is serialised."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class _Report:
    namespace: str
    name: str
    uid: str
    resource_version: str
    message: str


@dataclass
class _Sent:
    event_name: str
    count: int


class _EventApi:
    """The two calls the recorder makes; raise :class:`ApiError` (or ``OSError``) like the client."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def create(self, namespace: str, body: dict[str, object]) -> None:
        path = path_of("api", "v1", "namespaces", namespace, "events")
        self._client.request("POST", path, body=body, timeout=_REQUEST_TIMEOUT)

    def patch(self, namespace: str, name: str, body: dict[str, object]) -> None:
        self._client.request(
            "PATCH",
            path_of("api", "v1", "namespaces", namespace, "events", name),
            body=body,
            content_type="application/strategic-merge-patch+json",
            timeout=_REQUEST_TIMEOUT,
        )


class EventRecorder:
    """Reports config errors as Warning Events on the ConfigMap; thread-safe, non-blocking.

    ``namespace`` is where the pool ConfigMaps live; it names the ConfigMap of an object that does
    not carry a namespace itself (one read from a mounted volume). ``uid_lookup(namespace, name)``
    gives the ConfigMap's uid when known ("" otherwise).
    """

    def __init__(
        self,
        api_client: KubeClient,
        namespace: str,
        *,
        node_name: str,
        component: str = "hcs-deviceplugin",
        uid_lookup: Callable[[str, str], str] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = _EventApi(api_client)
        self._namespace = namespace
        self._node_name = node_name
        self._component = component
        self._uid_lookup = uid_lookup
        self._clock = clock
        self._queue: queue.Queue[_Report | None] = queue.Queue(_QUEUE_SIZE)
        self._sent: OrderedDict[tuple[str, str, str, str], _Sent] = OrderedDict()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def config_error(self, obj: ConfigMapObject, message: str) -> None:
        """Queue a Warning Event ``InvalidPoolConfig`` on ``obj``'s ConfigMap; returns at once."""
        namespace = obj.namespace or self._namespace
        uid = ""
        if self._uid_lookup is not None:
            try:
                uid = self._uid_lookup(namespace, obj.name)
            except Exception:
                _LOG.exception("uid lookup for configmap %s/%s failed", namespace, obj.name)
        report = _Report(namespace, obj.name, uid, obj.resource_version, truncate_message(message))
        with self._lock:
            if self._closed:
                _LOG.warning("event recorder closed; not reporting on configmap %s/%s", namespace, obj.name)
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pool-config-events", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait(report)
        except queue.Full:
            _LOG.warning(
                "event queue full; dropping event for configmap %s/%s: %s", namespace, obj.name, message
            )

    def flush(self, timeout: float) -> bool:
        """Wait until every queued report has been sent (or has failed); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (up to ``timeout``) and stop the worker; later reports are dropped."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            _LOG.warning("event queue still full at close; events not sent")
            return
        thread.join(timeout)

    # --- the worker ----------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            report = self._queue.get()
            try:
                if report is None:
                    return
                self._send(report)
            except Exception:
                _LOG.exception("event for configmap failed unexpectedly")
            finally:
                self._queue.task_done()

    def _send(self, report: _Report) -> None:
        key = (report.namespace, report.name, report.uid, report.message)
        sent = self._sent.get(key)
        now = self._clock()
        if sent is not None:
            try:
                self._api.patch(
                    report.namespace,
                    sent.event_name,
                    {"count": sent.count + 1, "lastTimestamp": _timestamp(now), "message": report.message},
                )
                sent.count += 1
                self._sent.move_to_end(key)
                return
            except ApiError as exc:
                if exc.status != _HTTP_NOT_FOUND:
                    self._log_failure("update", report, exc)
                    return
                del self._sent[key]  # expired meanwhile: create a new one
            except Exception as exc:
                self._log_failure("update", report, exc)
                return
        body = self._event(report, now)
        try:
            self._api.create(report.namespace, body)
        except Exception as exc:
            self._log_failure("create", report, exc)
            return
        metadata = body["metadata"]
        assert isinstance(metadata, dict)
        self._sent[key] = _Sent(str(metadata["name"]), 1)
        while len(self._sent) > _CACHE_SIZE:
            self._sent.popitem(last=False)

    def _event(self, report: _Report, now: datetime) -> dict[str, object]:
        """A core/v1 Event as the API takes it (JSON field names)."""
        suffix = f".{time.time_ns():x}"
        involved: dict[str, object] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "namespace": report.namespace,
            "name": report.name,
        }
        if report.uid:
            involved["uid"] = report.uid
        if report.resource_version:
            involved["resourceVersion"] = report.resource_version
        stamp = _timestamp(now)
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": report.name[: _MAX_NAME - len(suffix)] + suffix,
                "namespace": report.namespace,
            },
            "involvedObject": involved,
            "reason": REASON_INVALID_POOL_CONFIG,
            "message": report.message,
            "type": "Warning",
            "source": {"component": self._component, "host": self._node_name},
            "reportingComponent": self._component,
            "reportingInstance": self._node_name[:_MAX_REPORTING_INSTANCE],
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

    @staticmethod
    def _log_failure(action: str, report: _Report, exc: BaseException) -> None:
        status = getattr(exc, "status", None)
        detail = (
            f"HTTP {status} {getattr(exc, 'reason', '')}"
            if status is not None
            else f"{type(exc).__name__}: {exc}"
        )
        _LOG.warning(
            "could not %s event on configmap %s/%s (%s); message was: %s",
            action,
            report.namespace,
            report.name,
            detail,
            report.message,
        )
