"""Keeps this node's ResourceSlices in the API equal to the current DRA devices, on its own thread.

``update`` only records the devices and wakes the thread, so the control loop never waits for the
apiserver; the thread writes at once (a health change reaches the slice in one round trip) and
coalesces bursts. A write that fails is retried with back-off; the content and the generation are
kept, so the retry writes the same thing. At start it reads the pool's generation from the slices
already there (a previous run's), so its first write supersedes them; slices of ours beyond the
current count are deleted, and ``withdraw`` deletes them all (no DRA pool on the node any more).
It also reads the Node's uid then, for the slices' owner reference (no Node: no owner reference).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from hcs_deviceplugin.dra.devices import DraDevice
from hcs_deviceplugin.dra.resourceslice import JsonObject, build_slices
from hcs_deviceplugin.kubeapi.paths import path_of

if TYPE_CHECKING:
    from hcs_deviceplugin.kubeapi.client import KubeClient

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT = (5.0, 10.0)
_SLICES = path_of("apis", "resource.k8s.io", "v1", "resourceslices")
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class SliceStore(Protocol):
    """Where slices go: the API (:class:`SliceApi`), or memory for ``simulate``."""

    def list_own(self, driver: str, node: str) -> list[JsonObject]: ...

    def create(self, body: JsonObject) -> None: ...

    def replace(self, body: JsonObject) -> None: ...

    def delete(self, name: str) -> None: ...

    def node_uid(self, node: str) -> str:
        """The Node's uid, "" when there is no such Node (or it may not be read)."""
        ...


class SliceApi:
    """The four calls on ResourceSlices through the API, raw JSON in and out."""

    def __init__(self, api_client: KubeClient) -> None:
        self._client = api_client

    def list_own(self, driver: str, node: str) -> list[JsonObject]:
        answer = self._client.request(
            "GET",
            _SLICES,
            query={"fieldSelector": f"spec.nodeName={node},spec.driver={driver}"},
            timeout=_REQUEST_TIMEOUT,
        )
        items = (answer or {}).get("items") or []
        return [
            s
            for s in items
            if s.get("spec", {}).get("driver") == driver and s.get("spec", {}).get("nodeName") == node
        ]

    def create(self, body: JsonObject) -> None:
        self._client.request("POST", _SLICES, body=body, timeout=_REQUEST_TIMEOUT)

    def replace(self, body: JsonObject) -> None:
        name = body["metadata"]["name"]
        self._client.request("PUT", _slice(name), body=body, timeout=_REQUEST_TIMEOUT)

    def delete(self, name: str) -> None:
        self._client.request("DELETE", _slice(name), timeout=_REQUEST_TIMEOUT)

    def node_uid(self, node: str) -> str:
        try:
            answer = self._client.request(
                "GET", path_of("api", "v1", "nodes", node), timeout=_REQUEST_TIMEOUT
            )
        except Exception as exc:
            # No such Node, or no right to read it (RBAC from before the owner reference): the
            # slices go out unowned rather than not at all. Anything else is retried.
            if _status(exc) in (403, 404):
                return ""
            raise
        return str((answer or {}).get("metadata", {}).get("uid") or "")


def _slice(name: str) -> str:
    return path_of("apis", "resource.k8s.io", "v1", "resourceslices", name)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


class SlicePublisher:
    def __init__(self, api: SliceStore, driver: str, node: str) -> None:
        self._api = api
        self.driver = driver
        self.node = node
        self._cond = threading.Condition()
        self._wanted: tuple[DraDevice, ...] | None = None
        self._withdraw = False
        self._stopped = False
        self._content: list[JsonObject] | None = None
        self.generation = 0
        self.node_uid = ""
        self.writes = 0
        self.last_error = ""
        self._existing: dict[str, JsonObject] = {}
        self._thread = threading.Thread(target=self._run, name="dra-slices", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(10.0)

    def update(self, devices: Sequence[DraDevice]) -> None:
        with self._cond:
            self._wanted, self._withdraw = tuple(devices), False
            self._cond.notify_all()

    def withdraw(self) -> None:
        with self._cond:
            self._wanted, self._withdraw = None, True
            self._cond.notify_all()

    def _run(self) -> None:
        attempt = 0
        started = False
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or self._wanted is not None or self._withdraw)
                if self._stopped:
                    return
                wanted, withdraw = self._wanted, self._withdraw
                self._wanted, self._withdraw = None, False
            try:
                if not started:
                    self._read_existing()
                    started = True
                if withdraw:
                    self._delete_all()
                elif wanted is not None:
                    self._write(wanted)
                attempt, self.last_error = 0, ""
            except Exception as exc:  # any API failure: keep what we wanted and retry
                self.last_error = f"ResourceSlice write failed: {exc}"
                log.warning("DRA: %s", self.last_error)
                delay = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
                attempt += 1
                with self._cond:
                    if self._wanted is None and not self._withdraw:
                        self._wanted, self._withdraw = wanted, withdraw
                    self._cond.wait_for(lambda: self._stopped, delay)

    def _read_existing(self) -> None:
        own = self._api.list_own(self.driver, self.node)
        self._existing = {s["metadata"]["name"]: s for s in own}
        generations = [int(s["spec"]["pool"].get("generation", 0)) for s in own]
        self.generation = max(generations, default=0)
        self.node_uid = self._api.node_uid(self.node)
        if not self.node_uid:
            log.warning(
                "DRA: Node %s not found or not readable (RBAC: get nodes); its ResourceSlices get no "
                "owner reference",
                self.node,
            )

    def _write(self, devices: tuple[DraDevice, ...]) -> None:
        content = build_slices(self.driver, self.node, devices, 0, self.node_uid)
        if content == self._content:
            return
        generation = self.generation + 1
        slices = build_slices(self.driver, self.node, devices, generation, self.node_uid)
        for body in slices:
            name = body["metadata"]["name"]
            if name in self._existing:
                self._replace(body)
            else:
                self._create(body)
            self._existing[name] = body
        for name in sorted(set(self._existing) - {s["metadata"]["name"] for s in slices}):
            self._delete(name)
        self.generation, self._content = generation, content
        with self._cond:
            self.writes += 1
        log.info(
            "DRA: ResourceSlice pool %s generation %d: %d device(s)", self.node, generation, len(devices)
        )

    def _create(self, body: JsonObject) -> None:
        try:
            self._api.create(body)
        except Exception as exc:
            if _status(exc) != 409:
                raise
            self._api.replace(body)

    def _replace(self, body: JsonObject) -> None:
        try:
            self._api.replace(body)
        except Exception as exc:
            if _status(exc) != 404:
                raise
            self._api.create(body)

    def _delete(self, name: str) -> None:
        try:
            self._api.delete(name)
        except Exception as exc:
            if _status(exc) != 404:
                raise
        self._existing.pop(name, None)

    def _delete_all(self) -> None:
        for name in sorted(self._existing):
            self._delete(name)
        self._content = None
        log.info("DRA: ResourceSlices of %s withdrawn", self.node)
