"""What the scheduler allocated to a ResourceClaim, read from the API behind a one-method interface.

Kubelet's NodePrepareResources names a claim (namespace, uid, name) but does not carry its
allocation; a DRA plugin reads the ResourceClaim itself. :class:`ClaimSource` is that read, so the
preparer is tested against the fake apiserver through the real client, and a cache or an informer
can replace the plain GET later without touching the preparer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hcs_deviceplugin.kubeapi.paths import path_of

if TYPE_CHECKING:
    from hcs_deviceplugin.kubeapi.client import KubeClient

_REQUEST_TIMEOUT = (5.0, 10.0)


class ClaimError(Exception):
    """The claim cannot be prepared as it stands (not found, another uid, not allocated); kubelet
    retries, so the message says what is missing."""


@dataclass(frozen=True)
class AllocatedDevice:
    """One entry of ``status.allocation.devices.results`` for our driver."""

    request: str
    pool: str
    device: str


class ClaimSource(Protocol):
    def read(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The ResourceClaim object as JSON; :class:`ClaimError` if it does not exist."""
        ...


def allocated_devices(claim: Mapping[str, Any], uid: str, driver: str) -> tuple[AllocatedDevice, ...]:
    """The devices of ``driver`` allocated to ``claim`` (pure); ClaimError when the object is another
    claim than kubelet meant (a name reused after deletion) or is not allocated."""
    metadata = claim.get("metadata") or {}
    found_uid = metadata.get("uid", "")
    if found_uid != uid:
        raise ClaimError(
            f"resourceclaim {metadata.get('namespace')}/{metadata.get('name')} has uid {found_uid!r}, "
            f"kubelet asked for {uid!r}"
        )
    allocation = (claim.get("status") or {}).get("allocation")
    if not isinstance(allocation, Mapping):
        raise ClaimError(f"resourceclaim {metadata.get('namespace')}/{metadata.get('name')} is not allocated")
    results = (allocation.get("devices") or {}).get("results") or []
    devices = []
    for result in results:
        if not isinstance(result, Mapping) or result.get("driver") != driver:
            continue
        devices.append(
            AllocatedDevice(
                str(result.get("request", "")), str(result.get("pool", "")), str(result.get("device", ""))
            )
        )
    return tuple(devices)


class ApiClaimSource:
    """GET ``resource.k8s.io/v1`` ResourceClaims as raw JSON, which :func:`allocated_devices` reads."""

    def __init__(self, api_client: KubeClient) -> None:
        self._client = api_client

    def read(self, namespace: str, name: str) -> Mapping[str, Any]:
        from hcs_deviceplugin.kubeapi.client import ApiError

        path = path_of("apis", "resource.k8s.io", "v1", "namespaces", namespace, "resourceclaims", name)
        try:
            claim = self._client.request("GET", path, timeout=_REQUEST_TIMEOUT)
        except ApiError as exc:
            if exc.status == 404:
                raise ClaimError(f"resourceclaim {namespace}/{name} not found") from exc
            raise ClaimError(f"resourceclaim {namespace}/{name}: HTTP {exc.status} {exc.reason}") from exc
        if not isinstance(claim, dict):
            raise ClaimError(f"resourceclaim {namespace}/{name}: not a JSON object")
        return claim
