"""Pool ConfigMaps from the Kubernetes API: list, then watch from where the list left off.

The mounted-volume source needs no API access but sees a change only when kubelet next refreshes the
volume (a minute or so); this source sees it at once. It does what client-go's reflector does, for one
namespace and one label selector:

* **List** the matching ConfigMaps and hand the complete set to ``on_objects``. The list's
  ``metadata.resourceVersion`` is where the watch starts, so nothing between the two is lost.
* **Watch** from that version (with bookmarks) and apply each ADDED / MODIFIED / DELETED to the set,
  handing over the complete set after each change. A label change that makes an object stop matching
  arrives as DELETED, so the set always equals "what the selector matches now".
* **Resume** after a dropped connection or any error from the last resourceVersion seen (an event's
  or a bookmark's), after an exponential back-off, without listing again: the apiserver replays what
  happened in between. Only ``410 Gone`` ("too old resource version": history compacted) forces a new
  list, as the only way to learn what was missed.

``on_objects`` always gets the complete current list, never a delta, so a consumer that missed or
rejected one call is corrected by the next; and it is not called when nothing it can see changed (an
update of annotations only, a re-list that finds what we had), so a no-op never reaches the
reconciler.

The wire format is parsed here, from the raw body that :meth:`KubeClient.stream` hands over: the
watch's JSON lines are split as chunks arrive (an event may span chunks, or share one), each object
is read straight into a :class:`ConfigMapObject`, and ``stop()`` shuts the open response down so a
blocked read returns at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping

from hcs_deviceplugin.kubeapi.client import ApiError, KubeClient, StreamResponse
from hcs_deviceplugin.kubeapi.paths import path_of
from hcs_deviceplugin.pools.objects import ConfigMapObject

__all__ = ["ApiConfigMapSource", "configmap_from_json"]

_LOG = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a TCP connection to the apiserver."""

_LIST_READ_TIMEOUT = 60.0
"""Seconds a list may take to answer; a hung apiserver must not stall the source for ever."""

_WATCH_READ_SLACK = 30.0
"""The watch's read timeout is ``watch_timeout_seconds`` plus this: the server ends a healthy watch at
``timeoutSeconds``, so silence beyond that means a half-open connection that TCP alone would not notice
for hours."""

_STOP_JOIN_TIMEOUT = 5.0
"""``stop()`` waits this long for the thread. The watch read is interrupted at once; only a list or a
connect that is still waiting for the server's first byte can hold the thread longer, and it is a
daemon thread, so it cannot keep the process alive."""

_MIN_HEALTHY_WATCH = 1.0
"""A watch that ends cleanly without a single event in less than this many seconds is treated as a
failure (back-off), so that a server that closes every watch at once does not get a tight loop."""

_HTTP_GONE = 410


class _Expired(Exception):
    """The server no longer has the history we asked to resume from: list again."""


class _BadStream(ValueError):
    """A watch line or object that does not parse (or an ERROR event): resume from the last good version."""


# --- the wire format ------------------------------------------------------------------------------


def _mapping(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _BadStream(f"{what} is {type(value).__name__}, not an object")
    return value


def _string_map(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    items = _mapping(value, what)
    result: dict[str, str] = {}
    for key, item in items.items():
        if not isinstance(item, str):
            raise _BadStream(f"{what}[{key!r}] is {type(item).__name__}, not a string")
        result[key] = item
    return result


def _string(value: object, what: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise _BadStream(f"{what} is missing or not a string")
    return value


def configmap_from_json(raw: object, default_namespace: str = "") -> tuple[ConfigMapObject, str]:
    """One ConfigMap as the API sends it (a JSON object) → the value the formats parse, and its uid.

    ``binaryData`` is ignored: no pool format lives there. The uid is returned beside the value
    because :class:`ConfigMapObject` has no place for it and only Events need it.
    """
    obj = _mapping(raw, "object")
    meta = _mapping(obj.get("metadata"), "metadata")
    name = _string(meta.get("name"), "metadata.name", required=True)
    namespace = _string(meta.get("namespace"), "metadata.namespace") or default_namespace
    value = ConfigMapObject(
        name=name,
        namespace=namespace,
        data=_string_map(obj.get("data"), "data"),
        labels=_string_map(meta.get("labels"), "metadata.labels"),
        resource_version=_string(meta.get("resourceVersion"), "metadata.resourceVersion"),
        source=f"configmap {namespace}/{name}",
    )
    return value, _string(meta.get("uid"), "metadata.uid")


def _describe(exc: BaseException) -> str:
    """A one-line reason for logs and readiness: ``HTTP 410 Gone: <the API's Status message>``."""
    if isinstance(exc, ApiError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class _ConfigMapApi:
    """The two calls this source makes: the list, and the watch from a resourceVersion.

    ``namespace`` None lists Nodes instead (cluster-scoped): the same list + watch serves the Node
    watch of :mod:`.nodewatch`, whose objects need only metadata.
    """

    def __init__(
        self, client: KubeClient, namespace: str | None, label_selector: str, field_selector: str | None
    ) -> None:
        self._client = client
        self._path = (
            path_of("api", "v1", "nodes")
            if namespace is None
            else (path_of("api", "v1", "namespaces", namespace, "configmaps"))
        )
        self._selectors: dict[str, str] = {}
        if label_selector:
            self._selectors["labelSelector"] = label_selector
        if field_selector:
            self._selectors["fieldSelector"] = field_selector

    def open_list(self) -> StreamResponse:
        return self._client.stream(
            self._path, query=self._selectors, timeout=(_CONNECT_TIMEOUT, _LIST_READ_TIMEOUT)
        )

    def open_watch(self, resource_version: str, timeout_seconds: int) -> StreamResponse:
        query = {
            **self._selectors,
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        return self._client.stream(
            self._path, query=query, timeout=(_CONNECT_TIMEOUT, timeout_seconds + _WATCH_READ_SLACK)
        )


def _content(objects: Mapping[tuple[str, str], ConfigMapObject]) -> frozenset[object]:
    """What a consumer can see of the set: everything but resourceVersion."""
    return frozenset(
        (key, tuple(sorted(obj.data.items())), tuple(sorted(obj.labels.items())))
        for key, obj in objects.items()
    )


class ApiConfigMapSource:
    """List + watch of pool ConfigMaps in one namespace, delivered as complete lists to ``on_objects``.

    ``on_objects`` runs on the source's own thread; it should hand the list on rather than do slow
    work, since the watch is not read meanwhile (the apiserver buffers, so nothing is lost). An
    exception from it is logged and the source goes on.

    Back-off doubles from ``backoff_initial`` to ``backoff_max``, less up to 20 % jitter so that the
    pods of a DaemonSet do not all come back in step after an apiserver restart; it starts again from
    ``backoff_initial`` after a successful list or a healthy watch. A watch ending cleanly at its
    ``watch_timeout_seconds`` is the normal case and is resumed at once.
    """

    def __init__(
        self,
        api_client: KubeClient,
        namespace: str,
        label_selector: str,
        on_objects: Callable[[list[ConfigMapObject]], None],
        *,
        field_selector: str | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        watch_timeout_seconds: int = 300,
        nodes: bool = False,
    ) -> None:
        """``nodes``: list and watch Nodes (``namespace`` is then only a name for logs)."""
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("need 0 < backoff_initial <= backoff_max")
        if watch_timeout_seconds < 1:
            raise ValueError("watch_timeout_seconds must be at least 1")
        self._api = _ConfigMapApi(api_client, None if nodes else namespace, label_selector, field_selector)
        self._namespace = "" if nodes else namespace
        what = "nodes" if nodes else f"configmaps in {namespace}"
        selector = label_selector or field_selector
        self._what = what + (f" ({selector})" if selector else "")
        self._on_objects = on_objects
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._watch_timeout = watch_timeout_seconds
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: StreamResponse | None = None  # the open list or watch, for stop()
        self._last_error = ""
        # Owned by the source thread (read under the lock by uid_of / resource_version):
        self._objects: dict[tuple[str, str], ConfigMapObject] = {}
        self._uids: dict[tuple[str, str], str] = {}
        self._resource_version = ""
        self._delivered: frozenset[object] | None = None

    # --- public ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the list/watch thread; returns at once (see :meth:`wait_synced`)."""
        if self._thread is not None:
            raise RuntimeError("ApiConfigMapSource already started")
        self._thread = threading.Thread(
            target=self._run, name=f"configmap-watch-{self._namespace or 'nodes'}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread: an open response is shut down so that a blocked read returns now."""
        self._stopping.set()
        with self._lock:
            response = self._response
        if response is not None:
            _interrupt(response)
        if self._thread is not None:
            self._thread.join(_STOP_JOIN_TIMEOUT)
            if self._thread.is_alive():
                _LOG.warning("%s: source thread still busy %.0f s after stop", self._what, _STOP_JOIN_TIMEOUT)

    @property
    def synced(self) -> bool:
        """True once the first list has succeeded and been delivered."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    @property
    def last_error(self) -> str:
        """Why the source is not up to date right now ("" when it is): for readiness reasons."""
        with self._lock:
            return self._last_error

    @property
    def resource_version(self) -> str:
        """The last version the source has seen (list, event or bookmark); where a watch resumes."""
        with self._lock:
            return self._resource_version

    def uid_of(self, namespace: str, name: str) -> str:
        """The uid of a ConfigMap the source currently holds ("" if unknown): for Event references."""
        with self._lock:
            return self._uids.get((namespace, name), "")

    # --- the thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        delay = self._backoff_initial
        need_list = True
        expired_without_progress = False
        while not self._stopping.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                    delay = self._backoff_initial
                    continue
                if self._watch():
                    delay = self._backoff_initial
                    expired_without_progress = False
                    continue
                raise _BadStream("watch ended at once without an event")
            except _Expired:
                _LOG.info(
                    "%s: resourceVersion %s expired (410); listing again", self._what, self.resource_version
                )
                need_list = True
                if not expired_without_progress:  # the usual case: re-list at once
                    expired_without_progress = True
                    continue
                self._set_error("watch expired right after a list (410)")
            except Exception as exc:
                if self._stopping.is_set():
                    break
                action = "list" if need_list else f"watch from resourceVersion {self.resource_version}"
                message = f"{action}: {_describe(exc)}"
                self._set_error(message)
                if isinstance(exc, (ApiError, OSError, _BadStream)):
                    _LOG.warning("%s: %s; retrying in %.2f s", self._what, message, delay)
                else:
                    _LOG.exception(
                        "%s: unexpected error (%s); retrying in %.2f s", self._what, message, delay
                    )
            if self._stopping.wait(delay * random.uniform(0.8, 1.0)):
                break
            delay = min(delay * 2, self._backoff_max)
        _LOG.debug("%s: source thread stopped", self._what)

    def _list(self) -> None:
        response = self._open(self._api.open_list)
        try:
            body = json.loads(response.read())
        except ValueError as exc:
            raise _BadStream(f"list answer is not JSON ({exc})") from None
        finally:
            self._close(response)
        listing = _mapping(body, "list")
        resource_version = _string(
            _mapping(listing.get("metadata"), "list metadata").get("resourceVersion"), "rv"
        )
        items = listing.get("items") or []
        if not isinstance(items, list):
            raise _BadStream("list items is not an array")
        objects: dict[tuple[str, str], ConfigMapObject] = {}
        uids: dict[tuple[str, str], str] = {}
        for item in items:
            obj, uid = configmap_from_json(item, self._namespace)
            objects[obj.key] = obj
            uids[obj.key] = uid
        with self._lock:
            self._objects, self._uids = objects, uids
            self._resource_version = resource_version
            self._last_error = ""
        _LOG.info("%s: listed %d at resourceVersion %s", self._what, len(objects), resource_version)
        self._deliver(force=not self._synced.is_set())
        self._synced.set()

    def _watch(self) -> bool:
        """One watch request; True if it was healthy (delivered something, or ran its time)."""
        started = time.monotonic()
        try:
            response = self._open(lambda: self._api.open_watch(self.resource_version, self._watch_timeout))
        except ApiError as exc:
            if exc.status == _HTTP_GONE:  # some paths (and proxies) answer 410 before the stream
                raise _Expired() from exc
            raise
        progressed = False
        with self._lock:
            self._last_error = ""
        try:
            for line in response.lines():
                self._handle(line)
                progressed = True
        finally:
            self._close(response)
        _LOG.debug("%s: watch ended; resuming from %s", self._what, self.resource_version)
        return progressed or time.monotonic() - started >= _MIN_HEALTHY_WATCH

    def _handle(self, line: str) -> None:
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise _BadStream(f"watch line is not JSON ({exc}): {line[:200]!r}") from None
        event = _mapping(parsed, "watch event")
        kind = event.get("type")
        obj = _mapping(event.get("object"), f"{kind} object")
        if kind == "ERROR":
            code = obj.get("code")
            if code == _HTTP_GONE:
                raise _Expired()
            raise _BadStream(f"watch ERROR {code} {obj.get('reason', '')}: {obj.get('message', '')}")
        if kind == "BOOKMARK":
            version = _string(
                _mapping(obj.get("metadata"), "metadata").get("resourceVersion"), "rv", required=True
            )
            with self._lock:
                self._resource_version = version
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            _LOG.warning("%s: ignoring watch event of unknown type %r", self._what, kind)
            return
        value, uid = configmap_from_json(obj, self._namespace)
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(value.key, None)
                self._uids.pop(value.key, None)
            else:
                self._objects[value.key] = value
                self._uids[value.key] = uid
            if value.resource_version:
                self._resource_version = value.resource_version
        self._deliver()

    def _deliver(self, *, force: bool = False) -> None:
        """Hand the complete list on, unless nothing a consumer can see has changed."""
        with self._lock:
            content = _content(self._objects)
            if (content == self._delivered and not force) or self._stopping.is_set():
                return
            self._delivered = content
            objects = [self._objects[key] for key in sorted(self._objects)]
        try:
            self._on_objects(objects)
        except Exception:
            _LOG.exception("%s: on_objects failed for %d objects", self._what, len(objects))

    # --- helpers -----------------------------------------------------------------------------------

    def _open(self, call: Callable[[], StreamResponse]) -> StreamResponse:
        """Make a request and publish its response for stop(); closes it at once if stop came first."""
        response = call()
        with self._lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._response = response
        if stopping:
            response.close()
            raise _BadStream("stopped")
        return response

    def _close(self, response: StreamResponse) -> None:
        with self._lock:
            if self._response is response:
                self._response = None
        response.close()

    def _set_error(self, message: str) -> None:
        with self._lock:
            self._last_error = f"{self._what}: {message}"


def _interrupt(response: StreamResponse) -> None:
    """Unblock a read in another thread: shut the socket down for reading (close() alone does not)."""
    # The reader may be closing it at this very moment: then it is not blocked on it, which is all
    # that matters here.
    with contextlib.suppress(ValueError, OSError):
        response.shutdown()
