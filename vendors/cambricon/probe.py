"""The state of one MLU PCI function now, read from sysfs, procfs and /dev: the one health check.

Discovery and the health loop both call :func:`probe_function`, so a card is never Healthy in one and
Unhealthy in the other. The sysfs/procfs equivalent of the official plugin's cndev health call
(cambricon.md §6): a card is Healthy only when its PCI function is present and readable, a driver is
bound, its ``cambricon_dev<N>`` class device and ``/dev`` node exist, its ``information`` parses and
its ``core_state`` is ``CN_RUNNING``. cndev's own health state, compute mode and heartbeat are
library-only and are not read.

Every problem is a sentence naming the file or device, e.g. ``"/host/proc/.../core_state: CN_BOOTING"``
or ``"/host/sys/bus/pci/devices/0000:03:00.0/numa_node: not an integer: 'zz'"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vendors.cambricon import procfs
from vendors.cambricon.classdev import CARD_NODE_PREFIX, CLASS_DIR
from vendors.pcisysfs.files import SysfsFileError
from vendors.pcisysfs.pci import PciFunction, pci_function_present, read_pci_function


def card_node(slot: int) -> str:
    """The host path of the card's device node (the driver's name, kept inside containers)."""
    return f"/dev/{CARD_NODE_PREFIX}{slot}"


@dataclass(frozen=True)
class FunctionState:
    """What one function looks like now. ``problems`` empty means Healthy.

    ``function``/``information``/``core_state`` are None when they could not be read (the reason is
    in ``problems``); ``slot`` is None when no class device names the function.
    """

    bdf: str
    present: bool
    function: PciFunction | None = None
    slot: int | None = None
    information: procfs.MluInformation | None = None
    core_state: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def reason(self) -> str:
        return "; ".join(self.problems)


def probe_function(
    host_root: Path, bdf: str, slots: Mapping[str, int], function: PciFunction | None = None
) -> FunctionState:
    """Read everything that decides the card's health; ``slots`` is :func:`classdev.slot_map` now.

    ``function`` is the PCI function as a scan just read it, to save reading it twice; None reads it.

    An unbound function stops here: its class device, procfs directory and /dev node belong to the
    driver and are gone with it, so listing them too would only repeat the cause.
    """
    if not pci_function_present(host_root, bdf):
        return FunctionState(bdf, present=False, problems=(f"PCI function {bdf} removed",))
    problems: list[str] = []
    try:
        function = function or read_pci_function(host_root, bdf)
    except SysfsFileError as err:
        problems.append(str(err))
    if function is not None and function.driver is None:
        return FunctionState(bdf, True, function, problems=(f"PCI function {bdf} has no driver bound",))
    slot = slots.get(bdf)
    if slot is None:
        problems.append(f"no {host_root / CLASS_DIR}/{CARD_NODE_PREFIX}<N> links to PCI function {bdf}")
    elif not (host_root / card_node(slot).lstrip("/")).exists():
        problems.append(f"device node {card_node(slot)} missing")
    information: procfs.MluInformation | None = None
    try:
        information = procfs.read_information(host_root, bdf)
    except SysfsFileError as err:
        problems.append(str(err))
    state: str | None = None
    try:
        state = procfs.read_core_state(host_root, bdf)
    except SysfsFileError as err:
        problems.append(str(err))
    else:
        if state != procfs.RUNNING:
            problems.append(f"{procfs.core_state_path(host_root, bdf)}: {state}")
    return FunctionState(bdf, True, function, slot, information, state, tuple(problems))
