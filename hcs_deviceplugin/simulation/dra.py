"""``simulate``'s stand-ins for the API behind the DRA front end: ResourceClaims the scenario
"allocates" as the scheduler would, and ResourceSlices kept in memory, so the simulated node shows a
DRA pool without a cluster. The front end itself, its sockets and the DRA kubelet simulator are the
real ones."""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from hcs_deviceplugin.dra.claims import ClaimError

JsonObject = dict[str, Any]


class MemoryClaims:
    """ResourceClaims by (namespace, name); :meth:`allocate` plays the scheduler."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], JsonObject] = {}

    def allocate(
        self, namespace: str, name: str, driver: str, pool: str, devices: Sequence[str]
    ) -> tuple[str, str, str]:
        """A claim with ``devices`` of ``driver``'s ``pool`` allocated; (namespace, uid, name)."""
        uid = str(uuid.uuid4())
        results = [{"request": "gpu", "driver": driver, "pool": pool, "device": d} for d in devices]
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name, "uid": uid},
            "status": {"allocation": {"devices": {"results": results}}},
        }
        with self._lock:
            self._claims[(namespace, name)] = claim
        return namespace, uid, name

    def read(self, namespace: str, name: str) -> Mapping[str, Any]:
        with self._lock:
            claim = self._claims.get((namespace, name))
        if claim is None:
            raise ClaimError(f"resourceclaim {namespace}/{name} not found")
        return copy.deepcopy(claim)


class MemorySlices:
    """ResourceSlices by name, written by the slice publisher."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.slices: dict[str, JsonObject] = {}

    def list_own(self, driver: str, node: str) -> list[JsonObject]:
        with self._cond:
            return [
                copy.deepcopy(s)
                for s in self.slices.values()
                if s["spec"]["driver"] == driver and s["spec"]["nodeName"] == node
            ]

    def create(self, body: JsonObject) -> None:
        self.replace(body)

    def replace(self, body: JsonObject) -> None:
        with self._cond:
            self.slices[body["metadata"]["name"]] = copy.deepcopy(body)
            self._cond.notify_all()

    def delete(self, name: str) -> None:
        with self._cond:
            self.slices.pop(name, None)
            self._cond.notify_all()

    def node_uid(self, node: str) -> str:
        """The simulated node's uid, stable per name, so its slices name their Node as on a cluster."""
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, node))

    def devices(self) -> dict[str, JsonObject]:
        with self._cond:
            return {d["name"]: d for s in self.slices.values() for d in s["spec"]["devices"]}

    def wait_devices(self, count: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(
                lambda: sum(len(s["spec"]["devices"]) for s in self.slices.values()) == count, timeout
            )
