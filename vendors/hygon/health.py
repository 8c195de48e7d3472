"""Per-card health from sysfs and /dev, and the stream that reports its changes.

sysfs has no health events, so health is a state recomputed whenever the hotplug watcher wakes (a
udev add/remove/change on the ``pci`` or ``drm`` subsystem, or the bounded re-scan): a card is
Healthy when (hygon.md §6)

* its PCI function is present and its files read (a hot-removed card's directory is gone; a
  malformed ``numa_node`` names its path),
* it is bound to a DCU driver (``hydcu``, ``hycu``, ``amdgpu``) whose module ``initstate`` is ``live``,
* both of its DRM minors exist, in sysfs and as ``/dev/dri`` nodes, and are the minors discovery saw,
* KFD lists a readable node for it with the matching ``drm_render_minor``,
* ``/dev/kfd`` exists (the only check HAMi's and ROCm's plugins make).

It goes back to Healthy by itself when all of these hold again: health is never a latch. A fault
seen only in KFD must be seen by two checks in a row (:class:`Confirm`), because KFD rebuilds its
whole sysfs tree whenever a GPU comes or goes. ECC/RAS counters would be a better fault signal, but
they come only through ``libhydmi``/rocm_smi (and the amdgpu-style ``ras/`` files are unverified on
Hygon), so they are not read.

A card that appears (or comes back with other DRM minors, or the node-wide device nodes change)
makes the stream yield :class:`~hcs_deviceplugin.model.InventoryChanged`, so the daemon discovers
again; a card that disappears only goes Unhealthy and keeps its id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.model import Health
from vendors.hygon import drm, kfd
from vendors.hygon.driver import DCU_DRIVERS, driver_fault
from vendors.hygon.edits import SharedNodes, present_shared_devices
from vendors.hygon.facts import CardFacts
from vendors.pcisysfs.files import SysfsFileError
from vendors.pcisysfs.pci import function_dir, pci_function_present, read_pci_function

Verdict = tuple[Health, str]


@dataclass(frozen=True)
class CardState:
    """One card's health now; ``settling`` when its only fault is in the KFD topology (:class:`Confirm`)."""

    health: Health
    reason: str = ""
    settling: bool = False

    @property
    def verdict(self) -> Verdict:
        return self.health, self.reason


HEALTHY = CardState(Health.HEALTHY)


def _bad(reason: str, settling: bool = False) -> CardState:
    return CardState(Health.UNHEALTHY, reason, settling)


def _kfd_fault(topology: kfd.KfdTopology, facts: CardFacts) -> str:
    node = topology.gpu_for(facts.address, facts.minors.render)
    if node is None:
        why = f"no KFD topology node for {facts.address} (renderD{facts.minors.render})"
        if not topology.present:
            why += ": KFD not loaded"
        unattributed = topology.unattributed_errors()
        if unattributed:
            why += "; unreadable: " + "; ".join(str(e) for e in unattributed)
        return why
    if node.error is not None:
        return str(node.error)
    if facts.minors.render is not None and node.render_minor != facts.minors.render:
        return (
            f"{node.path / 'properties'}: drm_render_minor {node.render_minor}, "
            f"expected {facts.minors.render}"
        )
    return ""


def check_card(host_root: Path, facts: CardFacts, topology: kfd.KfdTopology, kfd_missing: str) -> CardState:
    """The card's health now and, when Unhealthy, the first reason (naming a file where one is to blame)."""
    address = facts.address
    if not pci_function_present(host_root, address):
        return _bad(f"PCI function {address} removed")
    try:
        function = read_pci_function(host_root, address)
    except SysfsFileError as err:
        return _bad(str(err))
    if facts.device_id and function.device_id != facts.device_id:
        return _bad(f"{address} is now device 0x{function.device_id:04x}, not this card")
    if function.driver is None:
        return _bad(f"driver unbound from {address}")
    if function.driver not in DCU_DRIVERS:
        return _bad(f"{address} bound to {function.driver}, not a DCU driver")
    fault = driver_fault(host_root, function.driver)
    if fault:
        return _bad(fault)
    directory = function_dir(host_root, address)
    now = drm.function_minors(directory)
    if now.complete and now != facts.minors:
        return _bad(
            f"DRM minors of {address} changed to card{now.card}/renderD{now.render}; discovery pending"
        )
    missing = drm.missing_minors(host_root, directory, address, facts.minors)
    if missing:
        return _bad("; ".join(missing))
    if kfd_missing:
        return _bad(kfd_missing)
    fault = _kfd_fault(topology, facts)
    if fault:
        return _bad(fault, settling=True)
    return HEALTHY


def check_cards(
    host_root: Path, cards: Iterable[CardFacts], topology: kfd.KfdTopology | None = None
) -> dict[str, CardState]:
    """Every card's verdict; reads the KFD topology once (light: no banks or links) unless given."""
    topo = topology if topology is not None else kfd.read_topology(host_root, details=False)
    kfd_dev = host_root / "dev/kfd"
    kfd_missing = "" if kfd_dev.exists() else f"{kfd_dev} missing"
    return {f.card_id: check_card(host_root, f, topo, kfd_missing) for f in cards}


class Confirm:
    """Reports a KFD-only fault once two checks in a row have seen it.

    When a GPU comes or goes, KFD removes its whole sysfs node tree and builds it again, renumbered;
    a check that lands in between sees every card's node missing. The faults that matter there come
    with their own, immediate signal (the PCI function gone, the driver unbound, DRM minors gone), so
    a fault seen only in KFD waits one more re-scan interval to be real.
    """

    def __init__(self) -> None:
        self._pending: set[str] = set()

    def __call__(self, states: Mapping[str, CardState]) -> dict[str, Verdict]:
        confirmed: dict[str, Verdict] = {}
        pending: set[str] = set()
        for card_id, state in states.items():
            if state.settling and state.health is Health.UNHEALTHY:
                pending.add(card_id)
                if card_id not in self._pending:
                    continue
            confirmed[card_id] = state.verdict
        self._pending = pending
        return confirmed


def _minors_text(minors: drm.DrmMinors) -> str:
    card = "?" if minors.card is None else str(minors.card)
    render = "?" if minors.render is None else str(minors.render)
    return f"card{card}/renderD{render}"


def stale_facts(
    host_root: Path,
    known: Mapping[str, CardFacts],
    shared: SharedNodes,
    dcu_addresses: Callable[[], Iterable[str]],
) -> frozenset[str]:
    """What discovery must run again for: a DCU it does not know, new DRM minors, changed shared nodes.

    One line per fact, naming the state it saw (a new DCU's minors so far), so that a card whose
    driver finishes binding after the rediscovery its appearance started is a new fact, and is
    announced again (see :mod:`vendors.pcisysfs.health`). ``known`` is by PCI address;
    ``dcu_addresses`` lists the DCU functions present now.
    """
    facts: set[str] = set()
    for address in dcu_addresses():
        now = drm.function_minors(function_dir(host_root, address))
        seen = known.get(address)
        if seen is None:
            facts.add(f"new DCU function {address} ({_minors_text(now)})")
        elif now.complete and now != seen.minors:
            facts.add(f"DRM minors of {address} are {_minors_text(now)}, not {_minors_text(seen.minors)}")
    devices = present_shared_devices(host_root)
    if devices != shared.devices:
        facts.add(f"shared device nodes are {', '.join(devices) or 'none'}, not {', '.join(shared.devices)}")
    return frozenset(facts)
