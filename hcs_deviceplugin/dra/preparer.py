"""NodePrepareResources / NodeUnprepareResources as plain methods: claim in, CDI names out.

For each claim: the devices the scheduler allocated to it for our driver (read through a
:class:`~hcs_deviceplugin.dra.claims.ClaimSource`) must be in this node's pool, in a DRA pool of ours
now, healthy, and not prepared for another claim; their CDI entries must be in the written spec
(``ensure_cdi``). Then the claim is recorded in the checkpoint *before* kubelet hears of it, and its
cards count as held (:meth:`ClaimPreparer.holds`) until Unprepare, so the reconciler never moves a
claimed card to a device plugin pool while a container may use it.

Both calls are idempotent: a prepared claim answers from the record (no API read, no second hold),
an unknown claim unprepares to success. The CDI entries are per device and written for every card
of the node by the CDI publisher (the same names Allocate uses), so Unprepare only releases the hold.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from hcs_deviceplugin.dra.checkpoint import ClaimCheckpoint, PreparedClaim, PreparedDevice
from hcs_deviceplugin.dra.claims import ClaimError, ClaimSource, allocated_devices
from hcs_deviceplugin.dra.devices import DraDevice
from hcs_deviceplugin.model import Health

log = logging.getLogger(__name__)

EnsureCdi = Callable[[Sequence[DraDevice]], str]
"""Makes sure the spec names these devices; returns "" or why it cannot."""


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PrepareResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class ClaimPreparer:
    """The one owner of prepared claims: gRPC threads call prepare/unprepare, the daemon sets the
    devices and reads the holds. One lock; the API read happens outside it."""

    def __init__(
        self,
        driver: str,
        pool_name: str,
        claims: ClaimSource,
        checkpoint: ClaimCheckpoint,
        ensure_cdi: EnsureCdi,
        on_holds_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.driver = driver
        self.pool_name = pool_name
        self._claims = claims
        self._checkpoint = checkpoint
        self._ensure_cdi = ensure_cdi
        self._on_holds_changed = on_holds_changed
        self._lock = threading.Lock()
        self._devices: Mapping[str, DraDevice] = MappingProxyType({})
        self._prepared: dict[str, PreparedClaim] = checkpoint.load()
        if self._prepared:
            log.info("DRA: %d prepared claim(s) restored from %s", len(self._prepared), checkpoint.path)

    def set_devices(self, devices: Iterable[DraDevice]) -> None:
        with self._lock:
            self._devices = MappingProxyType({d.name: d for d in devices})

    def prepared(self) -> dict[str, PreparedClaim]:
        with self._lock:
            return dict(self._prepared)

    def holds(self) -> dict[str, frozenset[str]]:
        """holder key → unit ids prepared for claims (merged with pod-resources' listing)."""
        with self._lock:
            held: dict[str, set[str]] = {}
            for claim in self._prepared.values():
                for device in claim.devices:
                    held.setdefault(device.holder_key, set()).add(device.unit_id)
        return {key: frozenset(ids) for key, ids in held.items()}

    def prepare(self, claim: ClaimRef) -> PrepareResult:
        with self._lock:
            done = self._prepared.get(claim.uid)
        if done is not None:
            return PrepareResult(done.devices)
        try:
            allocated = allocated_devices(
                self._claims.read(claim.namespace, claim.name), claim.uid, self.driver
            )
        except ClaimError as exc:
            return PrepareResult(error=str(exc))
        except Exception as exc:  # the API may fail in any way; kubelet retries
            log.warning("DRA: reading claim %s/%s failed: %s", claim.namespace, claim.name, exc)
            return PrepareResult(error=f"reading resourceclaim {claim.namespace}/{claim.name}: {exc}")
        with self._lock:
            done = self._prepared.get(claim.uid)
            if done is not None:  # prepared by a concurrent call meanwhile
                return PrepareResult(done.devices)
            chosen, problem = self._check(claim, [(a.request, a.pool, a.device) for a in allocated])
            if problem:
                return PrepareResult(error=problem)
            problem = self._ensure_cdi([device for device, _ in chosen])
            if problem:
                return PrepareResult(error=problem)
            prepared = tuple(
                PreparedDevice(
                    requests=requests,
                    pool=self.pool_name,
                    device=device.name,
                    card_id=device.card_id,
                    unit_id=device.unit_id,
                    holder_key=device.holder_key,
                    cdi_ids=(device.cdi_name,),
                )
                for device, requests in chosen
            )
            record = dict(self._prepared)
            record[claim.uid] = PreparedClaim(claim.namespace, claim.name, prepared)
            try:
                self._checkpoint.save(record)
            except OSError as exc:
                return PrepareResult(error=f"cannot record the prepared claim: {exc}")
            self._prepared = record
        log.info("DRA: prepared claim %s/%s: %s", claim.namespace, claim.name, [d.device for d in prepared])
        self._on_holds_changed()
        return PrepareResult(prepared)

    def unprepare(self, claim: ClaimRef) -> str:
        """ "" when the claim is not prepared (any more); else why it could not be released."""
        with self._lock:
            if claim.uid not in self._prepared:
                return ""
            record = {uid: c for uid, c in self._prepared.items() if uid != claim.uid}
            try:
                self._checkpoint.save(record)
            except OSError as exc:
                return f"cannot record the released claim: {exc}"
            self._prepared = record
        log.info("DRA: unprepared claim %s/%s", claim.namespace, claim.name)
        self._on_holds_changed()
        return ""

    def _check(
        self, claim: ClaimRef, allocated: Sequence[tuple[str, str, str]]
    ) -> tuple[list[tuple[DraDevice, tuple[str, ...]]], str]:
        """Under the lock: our devices for the claim with their request names, or the first problem."""
        if not allocated:
            return [], f"resourceclaim {claim.namespace}/{claim.name} has no device of driver {self.driver}"
        taken = {d.device: uid for uid, c in self._prepared.items() for d in c.devices}
        requests: dict[str, list[str]] = {}
        for request, pool, name in allocated:
            if pool != self.pool_name:
                return [], f"device {pool}/{name} is in pool {pool}, not this node's pool {self.pool_name}"
            device = self._devices.get(name)
            if device is None:
                return [], f"device {name} is not in a DRA pool of this node now"
            if device.health is Health.UNHEALTHY:
                return [], f"device {name} is unhealthy"
            if name in taken:
                return [], f"device {name} is already prepared for claim {taken[name]}"
            requests.setdefault(name, [])
            if request and request not in requests[name]:
                requests[name].append(request)
        return [(self._devices[name], tuple(reqs)) for name, reqs in requests.items()], ""
