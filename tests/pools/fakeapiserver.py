"""A small Kubernetes API server for ConfigMap list/watch, Event writes and Node labels, on 127.0.0.1.

The API source must be tested against the wire format a real apiserver speaks, not against mocks of the
client library: the list JSON with ``metadata.resourceVersion``, a watch as a chunked stream of JSON
lines, BOOKMARK events, ``ERROR`` events carrying a ``Status`` with code 410, connections that end
without the terminating chunk. This server keeps a global resourceVersion counter and a history of
changes, so a watch resumed from a resourceVersion replays exactly what it missed, as the watch cache
does; a label selector turns a change into ADDED / MODIFIED / DELETED the way the apiserver does when an
object starts or stops matching.

Tests script it: add, change and delete ConfigMaps; drop every open watch abruptly; hold new watches
(so a test can make changes while the client is certainly disconnected); expire watches (410 at the
start of the next ones, in the stream of the open ones, or by compaction); fail the next N list calls
or Event writes; send a bookmark. Every request is recorded (method, path, query, body) so tests can
assert on what the client asked for.

Nodes are there for the node labeler and the daemon's Node watch: list and watch of ``/api/v1/nodes``
(field selector ``metadata.name``, history and resume as for ConfigMaps), GET and PATCH (merge or
strategic merge) of ``/api/v1/nodes/{name}``, with the apiserver's validation of label keys and values
(422), so a label the real apiserver would refuse is refused here too. Tests create Nodes, change their
labels behind the client's back, and fail the next N node reads or patches.

``resource.k8s.io/v1`` is there for the DRA front end: tests put ResourceClaims (GET by name), and
the daemon creates, replaces (PUT, with optimistic concurrency on ``metadata.resourceVersion``),
reads, lists and deletes ResourceSlices. Every slice written is checked by ``slice_validator`` (when
set) and refused with 422 on any problem, as the apiserver's validation would.
"""

from __future__ import annotations

import http.server
import json
import re
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hcs_deviceplugin.kubeapi.client import KubeClient
from hcs_deviceplugin.kubeapi.config import ClusterConfig

JsonObject = dict[str, Any]

_CONFIGMAPS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/configmaps$")
_EVENTS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$")
_EVENT = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events/(?P<name>[^/]+)$")
_NODE = re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$")
_NODES = "/api/v1/nodes"
_RESOURCE_CLAIM = re.compile(
    r"^/apis/resource\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/resourceclaims/(?P<name>[^/]+)$"
)
_RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_RESOURCE_SLICE = re.compile(r"^/apis/resource\.k8s\.io/v1/resourceslices/(?P<name>[^/]+)$")
_CLUSTER = ""
"""The namespace of cluster-scoped objects (Nodes) in the change history."""
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_POLL = 0.05
"""Seconds between checks, in an idle watch, that the client is still there."""
_PATCH_TYPES = (
    "application/strategic-merge-patch+json",
    "application/merge-patch+json",
)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it; ``query`` keeps the first value of each parameter."""

    method: str
    path: str
    query: Mapping[str, str]
    body: Any = None
    content_type: str = ""
    at: float = field(default_factory=time.monotonic)

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


def is_list(request: RecordedRequest) -> bool:
    """A ConfigMap list request (not a watch)."""
    return request.method == "GET" and request.path.endswith("/configmaps") and not request.is_watch


def is_watch(request: RecordedRequest) -> bool:
    """A ConfigMap watch request."""
    return request.method == "GET" and request.path.endswith("/configmaps") and request.is_watch


def is_node_read(request: RecordedRequest) -> bool:
    """A GET of one Node."""
    return request.method == "GET" and bool(_NODE.match(request.path))


def is_node_patch(request: RecordedRequest) -> bool:
    """A PATCH of one Node."""
    return request.method == "PATCH" and bool(_NODE.match(request.path))


def label_errors(labels: Mapping[str, Any]) -> list[str]:
    """What the apiserver says about invalid label keys and values (metadata.labels validation)."""
    errors: list[str] = []
    for key, value in labels.items():
        prefix, slash, name = key.rpartition("/")
        if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
            errors.append(f"metadata.labels: Invalid value: {key!r}: prefix must be a DNS-1123 subdomain")
        if len(name) > 63 or not _LABEL_NAME.match(name):
            errors.append(f"metadata.labels: Invalid value: {key!r}: name part must be a valid label name")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errors.append(f"metadata.labels: Invalid value: {value!r}: a valid label must be 63 characters")
    return errors


@dataclass(frozen=True)
class _Change:
    """One history entry: the object before and after (None for absent), at ``rv``."""

    rv: int
    namespace: str
    old: JsonObject | None
    new: JsonObject | None


# --- selectors ---------------------------------------------------------------------------------------

_SET_TERM = re.compile(r"^(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s+\((?P<values>[^)]*)\)$")


def _split_selector(selector: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b=c`` is two terms)."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    terms.append("".join(current).strip())
    return [t for t in terms if t]


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """The apiserver's label selector grammar: ``=``, ``==``, ``!=``, ``in``, ``notin``, ``k``, ``!k``."""
    for term in _split_selector(selector):
        set_term = _SET_TERM.match(term)
        if set_term:
            values = {v.strip() for v in set_term["values"].split(",") if v.strip()}
            present = set_term["key"] in labels and labels[set_term["key"]] in values
            if present != (set_term["op"] == "in"):
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_selector_matches(selector: str, obj: JsonObject) -> bool:
    """``metadata.name`` and ``metadata.namespace`` with ``=``, ``==`` and ``!=``, as for ConfigMaps."""
    fields = {
        "metadata.name": obj["metadata"]["name"],
        "metadata.namespace": obj["metadata"].get("namespace", _CLUSTER),
    }
    for term in _split_selector(selector):
        negate = "!=" in term
        key, value = (s.strip() for s in re.split(r"!=|==|=", term, maxsplit=1))
        if key not in fields:
            raise ValueError(
                f'"{key}" is not a known field selector: only "metadata.name", "metadata.namespace"'
            )
        if (fields[key] == value) == negate:
            return False
    return True


def _status(code: int, reason: str, message: str) -> JsonObject:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _merge(target: JsonObject, patch: Mapping[str, Any]) -> None:
    """JSON merge patch (RFC 7386); for the scalar fields of an Event and the label map of a Node, the
    same as strategic. A map the target lacks is merged into an empty one, so its nulls are dropped."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            _merge(target[key], value)
        else:
            target[key] = value


class FakeApiServer:
    """The server and its state; use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._rv = 100
        self._compacted_rv = 0
        self._objects: dict[tuple[str, str], JsonObject] = {}
        self._history: list[_Change] = []
        self._deleted_states: dict[int, JsonObject] = {}  # a deletion's rv → the object as DELETED shows it
        self._requests: list[RecordedRequest] = []
        self._events: dict[tuple[str, str], JsonObject] = {}
        self._fail_lists: tuple[int, int] = (0, 500)
        self._fail_event_writes = 0
        self._nodes: dict[str, JsonObject] = {}
        self._claims: dict[tuple[str, str], JsonObject] = {}
        self._slices: dict[str, JsonObject] = {}
        self.slice_validator: Callable[[JsonObject], list[str]] | None = None
        self._fail_node_reads: tuple[int, int] = (0, 500)
        self._fail_node_patches: tuple[int, int] = (0, 500)
        self._expire_next_watches: list[bool] = []  # one entry a watch; True: HTTP 410, False: ERROR event
        self._drop_generation = 0
        self._expire_generation = 0
        self._bookmark_generation = 0
        self._bookmarks_written = 0
        self._raw_lines: list[tuple[int, bytes]] = []  # (sequence, line) injected into open watches
        self._raw_seq = 0
        self._error_events: list[tuple[int, JsonObject]] = []
        self._watches_open = 0
        self._watches_started = 0
        self._watch_gate = threading.Event()
        self._watch_gate.set()
        self._stopping = False
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        handler = _make_handler(self)
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(_POLL,), name="fake-apiserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._watch_gate.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    def configuration(self) -> ClusterConfig:
        """What a kubeconfig for this server says: plain HTTP, no credentials."""
        return ClusterConfig(server=f"http://127.0.0.1:{self.port}")

    def api_client(self) -> KubeClient:
        return KubeClient(self.configuration())

    # --- ConfigMaps --------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._cond:
            return str(self._rv)

    def put_configmap(
        self, namespace: str, name: str, data: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> str:
        """Create or replace a ConfigMap; returns its new resourceVersion (also the global one)."""
        with self._cond:
            self._rv += 1
            old = self._objects.get((namespace, name))
            metadata: JsonObject = {
                "name": name,
                "namespace": namespace,
                "uid": old["metadata"]["uid"] if old else str(uuid.uuid4()),
                "resourceVersion": str(self._rv),
                "creationTimestamp": "2025-01-01T00:00:00Z",
            }
            if labels:
                metadata["labels"] = dict(labels)
            new: JsonObject = {"metadata": metadata}
            if data:
                new["data"] = dict(data)
            self._objects[(namespace, name)] = new
            self._history.append(_Change(self._rv, namespace, old, new))
            self._cond.notify_all()
            return str(self._rv)

    def delete_configmap(self, namespace: str, name: str) -> str:
        """Delete; the DELETED event carries the last state with the deletion's resourceVersion."""
        with self._cond:
            old = self._objects.pop((namespace, name))
            self._rv += 1
            gone = json.loads(json.dumps(old))
            gone["metadata"]["resourceVersion"] = str(self._rv)
            self._history.append(_Change(self._rv, namespace, old, None))
            self._deleted_states[self._rv] = gone
            self._cond.notify_all()
            return str(self._rv)

    def uid_of(self, namespace: str, name: str) -> str:
        with self._cond:
            return str(self._objects[(namespace, name)]["metadata"]["uid"])

    # --- scripting watches -------------------------------------------------------------------------

    def drop_watches(self) -> None:
        """Every open watch connection ends abruptly: no terminating chunk, the socket shut down."""
        with self._cond:
            self._drop_generation += 1
            self._cond.notify_all()

    def hold_watches(self) -> None:
        """New watch requests are recorded but get no answer until :meth:`release_watches`."""
        self._watch_gate.clear()

    def release_watches(self) -> None:
        self._watch_gate.set()

    def expire_next_watches(self, count: int = 1, *, as_http_status: bool = False) -> None:
        """The next ``count`` watch requests are answered "too old resource version" (410).

        By default as the apiserver does it, a 200 stream with one ERROR event; ``as_http_status``
        answers with an HTTP 410 instead, which some paths (and proxies) produce.
        """
        with self._cond:
            self._expire_next_watches.extend([as_http_status] * count)

    def expire_open_watches(self) -> None:
        """Open watches get an ERROR event with a 410 Status and end, as when the watch cache falls behind."""
        with self._cond:
            self._expire_generation += 1
            self._cond.notify_all()

    def error_open_watches(
        self, code: int = 500, reason: str = "InternalError", message: str = "boom"
    ) -> None:
        """Open watches get an ERROR event with this Status (the stream stays open, as the client decides)."""
        with self._cond:
            self._raw_seq += 1
            self._error_events.append((self._raw_seq, _status(code, reason, message)))
            self._cond.notify_all()

    def inject_raw_line(self, line: bytes) -> None:
        """Write ``line`` (plus a newline) into every open watch, e.g. something that is not JSON."""
        with self._cond:
            self._raw_seq += 1
            self._raw_lines.append((self._raw_seq, line))
            self._cond.notify_all()

    def compact(self) -> None:
        """Forget history up to now: a watch from an older resourceVersion gets 410 at its start."""
        with self._cond:
            self._compacted_rv = self._rv
            self._cond.notify_all()

    def send_bookmark(self, timeout: float = 5.0) -> str:
        """Every open watch that asked for bookmarks gets one at the current resourceVersion.

        Returns that version once every such watch has written it, so that a test can drop the
        connection afterwards knowing the bookmark went out first.
        """
        with self._cond:
            rv = str(self._rv)
            target = self._bookmarks_written + self._watches_open
            self._bookmark_generation += 1
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._bookmarks_written >= target, timeout):
                raise TimeoutError("bookmark not written to every open watch")
            return rv

    def wait_watches_started(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until ``count`` watch streams have started (answered 200, events from now on reach them).

        Streams answered at once with a 410 do not count.
        """
        with self._cond:
            return self._cond.wait_for(lambda: self._watches_started >= count, timeout)

    def wait_open_watches(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until exactly ``count`` watch streams are open (answered and not yet ended)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._watches_open == count, timeout)

    # --- failures ----------------------------------------------------------------------------------

    def fail_next_lists(self, count: int, code: int = 500) -> None:
        with self._cond:
            self._fail_lists = (count, code)

    def fail_next_event_writes(self, count: int) -> None:
        with self._cond:
            self._fail_event_writes = count

    # --- Events ------------------------------------------------------------------------------------

    def events(self) -> list[JsonObject]:
        """Stored Events (as created and then patched), in creation order."""
        with self._cond:
            return [json.loads(json.dumps(e)) for e in self._events.values()]

    def delete_events(self) -> None:
        """Forget every Event, as the apiserver does when their TTL (one hour by default) runs out."""
        with self._cond:
            self._events.clear()

    # --- Nodes -------------------------------------------------------------------------------------

    def put_node(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """Create a Node, or replace its labels (uid kept); returns its new resourceVersion."""
        with self._cond:
            self._rv += 1
            old = self._nodes.get(name)
            new = self._nodes[name] = {
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "uid": old["metadata"]["uid"] if old else str(uuid.uuid4()),
                    "resourceVersion": str(self._rv),
                    "creationTimestamp": "2025-01-01T00:00:00Z",
                    "labels": dict(labels or {}),
                },
                "spec": {},
                "status": {},
            }
            self._history.append(_Change(self._rv, _CLUSTER, old, new))
            self._cond.notify_all()
            return str(self._rv)

    def node_labels(self, name: str) -> dict[str, str]:
        """The Node's labels as stored now."""
        with self._cond:
            return dict(self._nodes[name]["metadata"].get("labels", {}))

    def fail_next_node_reads(self, count: int, code: int = 500) -> None:
        with self._cond:
            self._fail_node_reads = (count, code)

    def fail_next_node_patches(self, count: int, code: int = 500) -> None:
        with self._cond:
            self._fail_node_patches = (count, code)

    # --- resource.k8s.io/v1 ----------------------------------------------------------------------

    def put_resource_claim(self, claim: JsonObject) -> JsonObject:
        """Store a ResourceClaim as given (uid kept if set, else made up); returns the stored copy."""
        with self._cond:
            stored = json.loads(json.dumps(claim))
            meta = stored.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            self._claims[(meta["namespace"], meta["name"])] = stored
            copy: JsonObject = json.loads(json.dumps(stored))
            return copy

    def resource_slices(self) -> dict[str, JsonObject]:
        with self._cond:
            copy: dict[str, JsonObject] = json.loads(json.dumps(self._slices))
            return copy

    def wait_resource_slices(
        self, predicate: Callable[[dict[str, JsonObject]], bool], timeout: float
    ) -> bool:
        """Wait until ``predicate(slices by name)`` holds (checked after every slice write)."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(json.loads(json.dumps(self._slices))), timeout)

    def _read_claim(self, namespace: str, name: str) -> tuple[int, JsonObject]:
        with self._cond:
            claim = self._claims.get((namespace, name))
            if claim is None:
                return 404, _status(404, "NotFound", f'resourceclaims.resource.k8s.io "{name}" not found')
            return 200, json.loads(json.dumps(claim))

    def _write_slice(self, name: str | None, body: Any, create: bool) -> tuple[int, JsonObject]:
        if not isinstance(body, dict) or body.get("kind") != "ResourceSlice":
            return 400, _status(400, "BadRequest", "body is not a ResourceSlice")
        meta = body.setdefault("metadata", {})
        name = name or meta.get("name", "")
        if meta.get("name") != name:
            return 400, _status(400, "BadRequest", "metadata.name does not match the path")
        problems = self.slice_validator(body) if self.slice_validator else []
        if problems:
            return 422, _status(
                422, "Invalid", f"ResourceSlice.resource.k8s.io {name!r} is invalid: {problems}"
            )
        with self._cond:
            old = self._slices.get(name)
            if create and old is not None:
                return 409, _status(
                    409, "AlreadyExists", f'resourceslices.resource.k8s.io "{name}" already exists'
                )
            if not create:
                if old is None:
                    return 404, _status(404, "NotFound", f'resourceslices.resource.k8s.io "{name}" not found')
                wanted = meta.get("resourceVersion")
                if wanted and wanted != old["metadata"]["resourceVersion"]:
                    return 409, _status(409, "Conflict", "the object has been modified")
                meta["uid"] = old["metadata"]["uid"]
            else:
                meta["uid"] = str(uuid.uuid4())
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            self._slices[name] = body
            self._cond.notify_all()
            return (201 if create else 200), json.loads(json.dumps(body))

    def _delete_slice(self, name: str) -> tuple[int, JsonObject]:
        with self._cond:
            old = self._slices.pop(name, None)
            self._cond.notify_all()
            if old is None:
                return 404, _status(404, "NotFound", f'resourceslices.resource.k8s.io "{name}" not found')
            return 200, old

    def _read_slices(self, name: str | None) -> tuple[int, JsonObject]:
        with self._cond:
            if name is None:
                items = [json.loads(json.dumps(o)) for _, o in sorted(self._slices.items())]
                return 200, {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSliceList",
                    "metadata": {"resourceVersion": str(self._rv)},
                    "items": items,
                }
            if name not in self._slices:
                return 404, _status(404, "NotFound", f'resourceslices.resource.k8s.io "{name}" not found')
            return 200, json.loads(json.dumps(self._slices[name]))

    def _read_node(self, name: str) -> tuple[int, JsonObject]:
        with self._cond:
            count, code = self._fail_node_reads
            if count > 0:
                self._fail_node_reads = (count - 1, code)
                return code, _status(code, "InternalError", "injected node read failure")
            if name not in self._nodes:
                return 404, _status(404, "NotFound", f'nodes "{name}" not found')
            return 200, json.loads(json.dumps(self._nodes[name]))

    def _patch_node(self, name: str, body: JsonObject) -> tuple[int, JsonObject]:
        """Merge ``body`` into the Node; refused as a whole (422) when the labels would be invalid."""
        with self._cond:
            count, code = self._fail_node_patches
            if count > 0:
                self._fail_node_patches = (count - 1, code)
                return code, _status(code, "InternalError", "injected node patch failure")
            if name not in self._nodes:
                return 404, _status(404, "NotFound", f'nodes "{name}" not found')
            patched = json.loads(json.dumps(self._nodes[name]))
            _merge(patched, body)
            errors = label_errors(patched["metadata"].get("labels", {}))
            if errors:
                return 422, _status(422, "Invalid", f'Node "{name}" is invalid: ' + "; ".join(errors))
            self._rv += 1
            patched["metadata"]["resourceVersion"] = str(self._rv)
            self._history.append(_Change(self._rv, _CLUSTER, self._nodes[name], patched))
            self._nodes[name] = patched
            self._cond.notify_all()
            return 200, json.loads(json.dumps(patched))

    # --- the request log ---------------------------------------------------------------------------

    def requests(self, predicate: Callable[[RecordedRequest], bool] | None = None) -> list[RecordedRequest]:
        with self._cond:
            return [r for r in self._requests if predicate is None or predicate(r)]

    def list_requests(self) -> list[RecordedRequest]:
        return self.requests(is_list)

    def watch_requests(self) -> list[RecordedRequest]:
        return self.requests(is_watch)

    def wait_requests(
        self, predicate: Callable[[RecordedRequest], bool], count: int, timeout: float = 5.0
    ) -> list[RecordedRequest]:
        """Wait until ``count`` recorded requests satisfy ``predicate``; returns all that do."""
        with self._cond:
            ok = self._cond.wait_for(lambda: sum(map(predicate, self._requests)) >= count, timeout)
            found = [r for r in self._requests if predicate(r)]
        if not ok:
            raise TimeoutError(f"{len(found)} of {count} expected requests arrived: {self._requests}")
        return found

    # --- used by the handler -----------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _matching(self, namespace: str, query: Mapping[str, str], obj: JsonObject | None) -> bool:
        if obj is None or obj["metadata"].get("namespace", _CLUSTER) != namespace:
            return False
        labels = obj["metadata"].get("labels", {})
        return label_selector_matches(query.get("labelSelector", ""), labels) and field_selector_matches(
            query.get("fieldSelector", ""), obj
        )

    def _list(self, namespace: str, query: Mapping[str, str]) -> tuple[int, JsonObject]:
        with self._cond:
            count, code = self._fail_lists
            if count > 0:
                self._fail_lists = (count - 1, code)
                return code, _status(code, "InternalError", "injected list failure")
            items = [
                json.loads(json.dumps(obj))
                for obj in self._collection(namespace)
                if self._matching(namespace, query, obj)
            ]
            return 200, {
                "kind": "NodeList" if namespace == _CLUSTER else "ConfigMapList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    def _collection(self, namespace: str) -> list[JsonObject]:
        """The objects a list or watch of ``namespace`` sees: ConfigMaps, or Nodes for the cluster scope."""
        if namespace == _CLUSTER:
            return [obj for _, obj in sorted(self._nodes.items())]
        return [obj for _, obj in sorted(self._objects.items())]

    def _event_for(self, change: _Change, query: Mapping[str, str]) -> JsonObject | None:
        """What a watcher with this selector sees for one change, if anything."""
        before = self._matching(change.namespace, query, change.old)
        after = self._matching(change.namespace, query, change.new)
        obj = self._deleted_states[change.rv] if change.new is None else change.new
        if before and after:
            kind = "MODIFIED"
        elif after:
            kind = "ADDED"
        elif before:
            kind = "DELETED"
        else:
            return None
        wire = {"kind": "ConfigMap", "apiVersion": "v1", **json.loads(json.dumps(obj))}
        return {"type": kind, "object": wire}

    def _events_since(self, namespace: str, query: Mapping[str, str], cursor: int) -> list[JsonObject]:
        return [
            event
            for change in self._history
            if change.rv > cursor and change.namespace == namespace
            for event in [self._event_for(change, query)]
            if event is not None
        ]


def _make_handler(server: FakeApiServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(_Handler):
        fake = server

    return Handler


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, as the apiserver; the watch is the only chunked, long-lived answer."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """Headers and body go out in two writes; with Nagle the body waits for the client's delayed ACK
    (40 ms a request), which a real apiserver never costs."""
    fake: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr line."""

    # --- plumbing ---

    def _query(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        return parts.path, {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _send_json(self, code: int, body: JsonObject) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _line(self, event: JsonObject) -> None:
        self._chunk(json.dumps(event).encode() + b"\n")

    # --- methods ---

    def do_GET(self) -> None:
        path, query = self._query()
        self.fake._record(RecordedRequest("GET", path, query))
        claim = _RESOURCE_CLAIM.match(path)
        if claim:
            self._send_json(*self.fake._read_claim(claim["ns"], claim["name"]))
            return
        one_slice = _RESOURCE_SLICE.match(path)
        if one_slice or path == _RESOURCE_SLICES:
            self._send_json(*self.fake._read_slices(one_slice["name"] if one_slice else None))
            return
        node = _NODE.match(path)
        if node:
            self._send_json(*self.fake._read_node(node["name"]))
            return
        match = _CONFIGMAPS.match(path)
        if not match and path != _NODES:
            self._send_json(404, _status(404, "NotFound", f"no route for {path}"))
            return
        namespace = match["ns"] if match else _CLUSTER
        try:
            field_selector_matches(
                query.get("fieldSelector", ""), {"metadata": {"name": "", "namespace": ""}}
            )
        except ValueError as exc:
            self._send_json(400, _status(400, "BadRequest", str(exc)))
            return
        if query.get("watch") in ("true", "1"):
            self._watch(namespace, query)
            return
        code, body = self.fake._list(namespace, query)
        self._send_json(code, body)

    def do_POST(self) -> None:
        path, query = self._query()
        body = self._body()
        self.fake._record(RecordedRequest("POST", path, query, body, self.headers.get("Content-Type", "")))
        if path == _RESOURCE_SLICES:
            self._send_json(*self.fake._write_slice(None, body, create=True))
            return
        match = _EVENTS.match(path)
        if not match:
            self._send_json(404, _status(404, "NotFound", f"no route for {path}"))
            return
        code, answer = self._create_event(match["ns"], body)
        self._send_json(code, answer)

    def do_PUT(self) -> None:
        path, query = self._query()
        body = self._body()
        self.fake._record(RecordedRequest("PUT", path, query, body, self.headers.get("Content-Type", "")))
        match = _RESOURCE_SLICE.match(path)
        if not match:
            self._send_json(404, _status(404, "NotFound", f"no route for {path}"))
            return
        self._send_json(*self.fake._write_slice(match["name"], body, create=False))

    def do_DELETE(self) -> None:
        path, query = self._query()
        self.fake._record(RecordedRequest("DELETE", path, query))
        match = _RESOURCE_SLICE.match(path)
        if not match:
            self._send_json(404, _status(404, "NotFound", f"no route for {path}"))
            return
        self._send_json(*self.fake._delete_slice(match["name"]))

    def do_PATCH(self) -> None:
        path, query = self._query()
        body = self._body()
        content_type = self.headers.get("Content-Type", "")
        self.fake._record(RecordedRequest("PATCH", path, query, body, content_type))
        node = _NODE.match(path)
        match = _EVENT.match(path)
        if not match and not node:
            self._send_json(404, _status(404, "NotFound", f"no route for {path}"))
            return
        if content_type not in _PATCH_TYPES or not isinstance(body, dict):
            self._send_json(415, _status(415, "UnsupportedMediaType", f"unsupported patch {content_type}"))
            return
        if node:
            self._send_json(*self.fake._patch_node(node["name"], body))
            return
        assert match is not None
        fake = self.fake
        with fake._cond:
            if fake._fail_event_writes > 0:
                fake._fail_event_writes -= 1
                answer = (500, _status(500, "InternalError", "injected event failure"))
            elif (match["ns"], match["name"]) not in fake._events:
                answer = (404, _status(404, "NotFound", f'events "{match["name"]}" not found'))
            else:
                stored = fake._events[(match["ns"], match["name"])]
                _merge(stored, body)
                fake._rv += 1
                stored["metadata"]["resourceVersion"] = str(fake._rv)
                answer = (200, json.loads(json.dumps(stored)))
        self._send_json(*answer)

    def _create_event(self, namespace: str, body: Any) -> tuple[int, JsonObject]:
        """Create, with the apiserver's checks that matter here (name, namespace agreement)."""
        fake = self.fake
        with fake._cond:
            if fake._fail_event_writes > 0:
                fake._fail_event_writes -= 1
                return 500, _status(500, "InternalError", "injected event failure")
            if not isinstance(body, dict) or not body.get("metadata", {}).get("name"):
                return 422, _status(422, "Invalid", "metadata.name: Required value")
            involved_ns = body.get("involvedObject", {}).get("namespace", "")
            if body["metadata"].get("namespace", namespace) != namespace or (
                involved_ns and involved_ns != namespace
            ):
                return 422, _status(
                    422, "Invalid", "involvedObject.namespace: does not match event.namespace"
                )
            key = (namespace, body["metadata"]["name"])
            if key in fake._events:
                return 409, _status(409, "AlreadyExists", f'events "{key[1]}" already exists')
            fake._rv += 1
            stored = json.loads(json.dumps(body))
            stored["metadata"].update(
                namespace=namespace, uid=str(uuid.uuid4()), resourceVersion=str(fake._rv)
            )
            fake._events[key] = stored
            fake._cond.notify_all()
            return 201, json.loads(json.dumps(stored))

    # --- the watch ---

    def _client_gone(self) -> bool:
        """The client closed its end (readable, and nothing to read: EOF)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _watch(self, namespace: str, query: dict[str, str]) -> None:
        fake = self.fake
        fake._watch_gate.wait()
        with fake._cond:
            if fake._stopping:
                self.close_connection = True
                return
            expire_as_http = fake._expire_next_watches.pop(0) if fake._expire_next_watches else None
            requested = query.get("resourceVersion", "")
            state = _WatchState(
                cursor=fake._rv if requested in ("", "0") else int(requested),
                drop_gen=fake._drop_generation,
                expire_gen=fake._expire_generation,
                bookmark_gen=fake._bookmark_generation,
                raw_seq=fake._raw_seq,
            )
            initial = []
            if requested in ("", "0"):  # "start at most recent": synthetic ADDED for what exists
                initial = [
                    {"type": "ADDED", "object": {"kind": "ConfigMap", "apiVersion": "v1", **obj}}
                    for obj in fake._collection(namespace)
                    if fake._matching(namespace, query, obj)
                ]
            too_old = expire_as_http is not None or (
                requested not in ("", "0") and state.cursor < fake._compacted_rv
            )
            if not too_old:
                fake._watches_open += 1
                fake._watches_started += 1
                fake._cond.notify_all()
        gone = _status(410, "Expired", f"too old resource version: {requested} ({fake._compacted_rv})")
        if too_old and expire_as_http:
            self._send_json(410, gone)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if too_old:
            self._line({"type": "ERROR", "object": gone})
            self._chunk(b"")
            return
        try:
            for event in initial:
                self._line(event)
            self._stream(namespace, query, state, gone)
        except OSError:
            self.close_connection = True  # the client went away
        finally:
            with fake._cond:
                fake._watches_open -= 1
                fake._cond.notify_all()

    def _stream(self, namespace: str, query: dict[str, str], state: _WatchState, gone: JsonObject) -> None:
        fake = self.fake
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with fake._cond:
                # Wake now and then to notice a client that went away, as the apiserver does at once.
                while not fake._cond.wait_for(
                    lambda: state.has_news(fake) or (deadline is not None and time.monotonic() >= deadline),
                    timeout=_POLL if deadline is None else min(_POLL, max(0.0, deadline - time.monotonic())),
                ):
                    if self._client_gone():
                        return
                events = fake._events_since(namespace, query, state.cursor)
                state.cursor = fake._rv
                raw = [line for seq, line in fake._raw_lines if seq > state.raw_seq]
                errors = [status for seq, status in fake._error_events if seq > state.raw_seq]
                state.raw_seq = fake._raw_seq
                bookmark = None
                if fake._bookmark_generation != state.bookmark_gen:
                    state.bookmark_gen = fake._bookmark_generation
                    bookmark = str(fake._rv)
                drop = fake._stopping or fake._drop_generation != state.drop_gen
                expire = fake._expire_generation != state.expire_gen
            for event in events:
                self._line(event)
            for line in raw:
                self._chunk(line + b"\n")
            for status in errors:
                self._line({"type": "ERROR", "object": status})
            if bookmark is not None:
                if bookmarks:
                    meta = {"resourceVersion": bookmark}
                    self._line(
                        {
                            "type": "BOOKMARK",
                            "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta},
                        }
                    )
                with fake._cond:
                    fake._bookmarks_written += 1
                    fake._cond.notify_all()
            if drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if expire:
                self._line({"type": "ERROR", "object": gone})
                self._chunk(b"")
                return
            if deadline is not None and time.monotonic() >= deadline:
                self._chunk(b"")
                return


@dataclass
class _WatchState:
    """What one open watch has already been sent, against the server's counters."""

    cursor: int
    drop_gen: int
    expire_gen: int
    bookmark_gen: int
    raw_seq: int

    def has_news(self, fake: FakeApiServer) -> bool:
        return (
            fake._stopping
            or fake._drop_generation != self.drop_gen
            or fake._expire_generation != self.expire_gen
            or fake._bookmark_generation != self.bookmark_gen
            or fake._raw_seq != self.raw_seq
            or bool(fake._history and fake._history[-1].rv > self.cursor)
        )
