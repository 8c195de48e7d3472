"""Builds an MLU host's sysfs, procfs and /dev under a temp root, as the MLU driver lays them out.

Layout (cambricon.md §2.2 and §8), all relative to the host root:

- ``sys/devices/pci<dom>:<bus>/<bridges>/<bdf>/`` with ``vendor``/``device``/``class``/``numa_node``,
  ``driver`` and (VFs) ``physfn`` links, through :func:`vendors.pcisysfs.fake.write_pci_function`;
- ``<function>/cambricon/cambricon_dev<N>/{dev,device -> ../../../<bdf>}`` and the class link
  ``sys/class/cambricon/cambricon_dev<N>``; ``cambricon_ctl`` under ``sys/devices/virtual/cambricon``;
  MIM capability nodes ``cap_dev<N>_mi<M>`` where a card has them (not cards: skipped by discovery);
- ``proc/driver/cambricon/mlus/<bdf>/{information,core_state}`` (also for VFs, as the driver does);
- ``dev/cambricon_dev<N>`` and its companions, ``dev/cambricon_ctl``, ``dev/cambricon-caps/...``,
  ``dev/ttyMS<N>``; ``sys/module/cambricon_drv``; ``usr/bin/cnmon``.

Device nodes are plain files: discovery only checks that they exist. :class:`FakeMluNode` changes the
tree as the kernel would (hot-removal, unbind, state changes, corrupt files); each change is ordered
so that a re-scan caught half-way still sees the card Unhealthy, never Healthy with parts missing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from vendors.pcisysfs.fake import bind_driver, remove_pci_function, unbind_driver, write_pci_function

VENDOR_ID = 0xCABC
MLU370_PF = 0x0370
MLU370_VF = 0x0371
DRIVER_MLU370 = "cambricon-pci-drv_mlu370_pigeon"
DRIVER_MLU500 = "cambricon-pci-drv_mlu500"
CHAR_MAJOR = 236
COMPANIONS = ("cambricon_ipcm{n}", "commu{n}", "cambr-msgq:{n}", "cambr-rpc:{n}", "cmsg_ctrl{n}")
LINK_FILE = "etc/cambricon/mlulink.yaml"
"""Where presets write the operator MLU-Link file (an ordinary file; the option takes its full path)."""


@dataclass(frozen=True)
class MluSpec:
    """One MLU PCI function and everything the driver makes for it.

    ``slot`` is N of ``cambricon_dev<N>`` (None: the driver made no class device). ``serial`` is the
    hex of ``Board Serial Number: SN/<hex>`` (None: no such line). ``vfs`` are SR-IOV VF addresses
    created with a ``physfn`` link to this function.
    """

    bdf: str
    slot: int | None
    board: str = "MLU370-S4"
    device_id: int = MLU370_PF
    serial: str | None = None
    numa_node: int = -1
    core_state: str = "CN_RUNNING"
    driver: str | None = DRIVER_MLU370
    bridges: tuple[str, ...] = ()
    pcie_firmware: bool = True
    companions: bool = True
    mim_instances: int = 0
    vfs: tuple[str, ...] = ()


@dataclass(frozen=True)
class MluLinkSpec:
    """One entry of the operator MLU-Link file: two cards by BDF and the number of links."""

    a: str
    b: str
    links: int = 1


@dataclass(frozen=True)
class NodeSpec:
    """A whole host: MLUs, shared nodes, the driver module, cnmon, an optional MLU-Link file."""

    cards: tuple[MluSpec, ...]
    driver_module: bool = True
    ctl: bool = True
    gdr: bool = False
    cnmon: bool = True
    mlu_links: tuple[MluLinkSpec, ...] = ()
    other_functions: tuple[str, ...] = ("0000:00:1f.6",)
    """Non-MLU functions (an Intel NIC) that a vendor scan has to skip."""


def information_text(spec: MluSpec, *, vf: bool = False) -> str:
    """``information`` in the driver's key order (cndrv_proc.c); values illustrative."""
    bus, rest = spec.bdf.split(":")[1:]
    dev, fn = rest.split(".")
    node = f"/dev/cambricon_dev{spec.slot}" if spec.slot is not None else "/dev/cambricon_dev"
    lines = [
        f"Device name: {spec.board}{'-VF' if vf else ''}",
        f"Device inode path: {node}",
        f"Device Major: {CHAR_MAJOR}",
        f"Device Minor: {spec.slot if spec.slot is not None else 0}",
        "Driver Version: v5.10.22",
        "MCU Version: v1.1.4",
    ]
    if spec.serial is not None:
        lines.append(f"Board Serial Number: SN/{spec.serial}")
    lines += ["MLU Firmware Version: v1.1.4", "Board CV: 0"]
    if spec.pcie_firmware:
        lines.append("PCIE Firmware Version: FV/1010007")
    if not vf:
        lines.append("IPU Freq: 1300MHz")
    lines += [
        "Interrupt Mode: MSIX",
        f"Bus Location: {int(bus, 16):x}_{int(dev, 16):x}_{int(fn, 16):x}",
        "Bus Type: PCIE",
        "LnkSta: Speed 16.0GT/s, Width x16",
        "Min_LnkSta: Speed 2.5GT/s, Width x1",
        "Region 0: Memory at 38bfc0000000 [size=256M]",
        "Region 2: Memory at 38bfd0000000 [size=256M]",
        "Region 4: Memory at 38bff0000000 [size=4M]",
    ]
    return "\n".join(lines) + "\n"


def _relative_symlink(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


@dataclass
class FakeMluNode:
    """A written tree and the changes a test or bench makes to it."""

    host_root: Path
    spec: NodeSpec
    link_file: Path | None = None
    _cards: dict[str, MluSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._cards = {c.bdf: c for c in self.spec.cards}

    # -- queries ------------------------------------------------------------------------------

    def card(self, bdf: str) -> MluSpec:
        return self._cards[bdf]

    @property
    def bdfs(self) -> list[str]:
        return [c.bdf for c in self.spec.cards]

    def path(self, relative: str) -> Path:
        return self.host_root / relative

    # -- the kernel's view of one card ----------------------------------------------------------

    def _function_dir(self, bdf: str) -> Path:
        return Path(os.path.realpath(self.host_root / "sys/bus/pci/devices" / bdf))

    def _write_driver_parts(self, spec: MluSpec) -> None:
        """What the MLU driver creates when it binds: class device, procfs, /dev nodes."""
        proc = self.host_root / "proc/driver/cambricon/mlus" / spec.bdf
        proc.mkdir(parents=True, exist_ok=True)
        (proc / "information").write_text(information_text(spec))
        (proc / "core_state").write_text(f"{spec.core_state}\n")
        if spec.slot is None:
            return
        n = spec.slot
        class_dir = self._function_dir(spec.bdf) / "cambricon" / f"cambricon_dev{n}"
        class_dir.mkdir(parents=True, exist_ok=True)
        (class_dir / "dev").write_text(f"{CHAR_MAJOR}:{n}\n")
        device_link = class_dir / "device"
        device_link.unlink(missing_ok=True)
        device_link.symlink_to(f"../../../{spec.bdf}")
        _relative_symlink(self.host_root / "sys/class/cambricon" / f"cambricon_dev{n}", class_dir)
        _touch(self.host_root / "dev" / f"cambricon_dev{n}")
        _touch(self.host_root / "dev" / f"ttyMS{n}")
        if spec.companions:
            for name in COMPANIONS:
                _touch(self.host_root / "dev" / name.format(n=n))
        for m in range(1, spec.mim_instances + 1):
            cap = f"cap_dev{n}_mi{m}"
            cap_dir = self.host_root / "sys/devices/virtual/cambricon" / cap
            cap_dir.mkdir(parents=True, exist_ok=True)
            (cap_dir / "dev").write_text(f"{CHAR_MAJOR + 1}:{n * 16 + m}\n")
            _relative_symlink(self.host_root / "sys/class/cambricon" / cap, cap_dir)
            _touch(self.host_root / "dev/cambricon-caps" / cap)

    def _remove_driver_parts(self, spec: MluSpec) -> None:
        shutil.rmtree(self.host_root / "proc/driver/cambricon/mlus" / spec.bdf, ignore_errors=True)
        if spec.slot is None:
            return
        n = spec.slot
        (self.host_root / "sys/class/cambricon" / f"cambricon_dev{n}").unlink(missing_ok=True)
        function_dir = self._function_dir(spec.bdf)
        if function_dir.is_dir():
            shutil.rmtree(function_dir / "cambricon", ignore_errors=True)
        for name in ("cambricon_dev{n}", "ttyMS{n}", *COMPANIONS):
            (self.host_root / "dev" / name.format(n=n)).unlink(missing_ok=True)
        for m in range(1, spec.mim_instances + 1):
            cap = f"cap_dev{n}_mi{m}"
            (self.host_root / "sys/class/cambricon" / cap).unlink(missing_ok=True)
            (self.host_root / "dev/cambricon-caps" / cap).unlink(missing_ok=True)

    def _write_card(self, spec: MluSpec) -> None:
        """Function first without a driver, then the driver's parts, then the binding (ordered: see
        the module docstring)."""
        write_pci_function(
            self.host_root,
            spec.bdf,
            vendor_id=VENDOR_ID,
            device_id=spec.device_id,
            numa_node=spec.numa_node,
            bridges=spec.bridges,
        )
        for vf in spec.vfs:
            write_pci_function(
                self.host_root,
                vf,
                vendor_id=VENDOR_ID,
                device_id=MLU370_VF if spec.device_id == MLU370_PF else spec.device_id + 1,
                numa_node=spec.numa_node,
                bridges=spec.bridges,
                physfn=spec.bdf,
                driver=spec.driver,
            )
            vf_proc = self.host_root / "proc/driver/cambricon/mlus" / vf
            vf_proc.mkdir(parents=True, exist_ok=True)
            (vf_proc / "information").write_text(information_text(replace(spec, bdf=vf), vf=True))
            (vf_proc / "core_state").write_text("CN_RUNNING\n")
        if spec.driver is None:
            return
        self._write_driver_parts(spec)
        bind_driver(self.host_root, spec.bdf, spec.driver)

    # -- changes --------------------------------------------------------------------------------

    def remove(self, bdf: str) -> None:
        """Hot-removal: the PCI function (and its VFs) go first, then what the driver had made for it."""
        spec = self._cards[bdf]
        for vf in spec.vfs:
            remove_pci_function(self.host_root, vf)
            shutil.rmtree(self.host_root / "proc/driver/cambricon/mlus" / vf, ignore_errors=True)
        remove_pci_function(self.host_root, bdf)
        self._remove_driver_parts(spec)

    def restore(self, bdf: str) -> None:
        """The card comes back (re-plugged or rescanned) as it was written, bound last."""
        self._write_card(self._cards[bdf])

    def add(self, spec: MluSpec) -> None:
        """Hot-add of a card the node did not have."""
        self._cards[spec.bdf] = spec
        self._write_card(spec)

    def unbind(self, bdf: str) -> None:
        """``echo <bdf> > .../unbind``: the binding goes first, then the driver's class device, procfs
        entries and /dev nodes; the PCI function stays."""
        unbind_driver(self.host_root, bdf)
        self._remove_driver_parts(self._cards[bdf])

    def rebind(self, bdf: str, slot: int | None = None) -> None:
        """Bind again; ``slot`` makes the driver number the card ``cambricon_dev<slot>`` this time."""
        if slot is not None:
            self._cards[bdf] = replace(self._cards[bdf], slot=slot)
        spec = self._cards[bdf]
        self._write_driver_parts(spec)
        bind_driver(self.host_root, bdf, spec.driver or DRIVER_MLU370)

    def set_core_state(self, bdf: str, state: str) -> None:
        self._cards[bdf] = replace(self._cards[bdf], core_state=state)
        path = self.host_root / "proc/driver/cambricon/mlus" / bdf / "core_state"
        tmp = path.with_name(".core_state.tmp")
        tmp.write_text(f"{state}\n")
        tmp.replace(path)

    def corrupt(self, relative: str, content: str | bytes = "zz\n") -> Path:
        """Overwrite a file under the host root (e.g. ``sys/bus/pci/devices/<bdf>/numa_node``) and
        return its full path; bytes allow content that is not UTF-8."""
        path = self.host_root / relative
        tmp = path.parent / f".{path.name}.tmp"
        if isinstance(content, bytes):
            tmp.write_bytes(content)
        else:
            tmp.write_text(content)
        tmp.replace(Path(os.path.realpath(path)))
        return path

    def repair_information(self, bdf: str) -> None:
        """Write ``information`` back as the driver would."""
        self.corrupt(f"proc/driver/cambricon/mlus/{bdf}/information", information_text(self._cards[bdf]))


def _write_link_file(host_root: Path, links: Sequence[MluLinkSpec]) -> Path:
    path = host_root / LINK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump([{"a": x.a, "b": x.b, "links": x.links} for x in links], sort_keys=False))
    return path


def write_cambricon_node(host_root: Path, spec: NodeSpec) -> FakeMluNode:
    """Write the whole host under ``host_root`` and return the handle that changes it."""
    host_root.mkdir(parents=True, exist_ok=True)
    node = FakeMluNode(host_root, spec)
    for index, address in enumerate(spec.other_functions):
        write_pci_function(
            host_root,
            address,
            vendor_id=0x8086,
            device_id=0x15B7 + index,
            class_code=0x020000,
            driver="e1000e",
        )
    if spec.driver_module:
        (host_root / "sys/module/cambricon_drv").mkdir(parents=True, exist_ok=True)
        (host_root / "sys/module/cambricon_drv/version").write_text("5.10.22\n")
        (host_root / "sys/class/cambricon").mkdir(parents=True, exist_ok=True)
    if spec.ctl:
        ctl = host_root / "sys/devices/virtual/cambricon/cambricon_ctl"
        ctl.mkdir(parents=True, exist_ok=True)
        (ctl / "dev").write_text(f"{CHAR_MAJOR}:255\n")
        _relative_symlink(host_root / "sys/class/cambricon/cambricon_ctl", ctl)
        _touch(host_root / "dev/cambricon_ctl")
    if spec.gdr:
        _touch(host_root / "dev/cambricon_gdr")
    if spec.cnmon:
        cnmon = host_root / "usr/bin/cnmon"
        cnmon.parent.mkdir(parents=True, exist_ok=True)
        cnmon.write_text("#!/bin/sh\necho fake cnmon\n")
        cnmon.chmod(0o755)
    (host_root / "dev").mkdir(parents=True, exist_ok=True)
    for card in spec.cards:
        node._write_card(card)
    if spec.mlu_links:
        node.link_file = _write_link_file(host_root, spec.mlu_links)
    return node


def _board_serial(board: int) -> str:
    return f"{0x1916A000 + board:08x}"


def mlulink_node(chips: int = 8) -> NodeSpec:
    """``chips // 2`` MLU370-X8 boards of two chips each behind the board's PCIe switch, half the
    boards on NUMA node 0 and half on 1, and an MLU-Link file joining boards 0-1 and 2-3.

    Checklist extras (cambricon.md §8): chip 0 has an SR-IOV VF (``physfn``); chip 1's
    ``information`` has no ``PCIE Firmware Version``; the last board's chips have their
    ``cambricon_dev`` numbers swapped against BDF order; chip 0 has one MIM capability node.
    """
    if chips < 2 or chips % 2:
        raise ValueError(f"MLU370-X8 boards carry two chips each; {chips} chips is not whole boards")
    boards = chips // 2
    cards: list[MluSpec] = []
    for board in range(boards):
        numa = 0 if board < max(1, boards // 2) else 1
        root_bus = 0x00 if numa == 0 else 0x80
        up_bus = root_bus + 0x10 + 0x10 * (board % max(1, boards // 2))
        bridges_root = (f"0000:{root_bus:02x}:{1 + board % 8:02x}.0", f"0000:{up_bus:02x}:00.0")
        for chip in range(2):
            position = board * 2 + chip
            slot = position
            if board == boards - 1 and boards > 1:
                slot = board * 2 + (1 - chip)
            cards.append(
                MluSpec(
                    bdf=f"0000:{up_bus + 2 + chip:02x}:00.0",
                    slot=slot,
                    board="MLU370-X8",
                    serial=_board_serial(board),
                    numa_node=numa,
                    bridges=(*bridges_root, f"0000:{up_bus + 1:02x}:{chip:02x}.0"),
                    pcie_firmware=position != 1,
                    mim_instances=1 if position == 0 else 0,
                    vfs=(f"0000:{up_bus + 2 + chip:02x}:00.1",) if position == 0 else (),
                )
            )
    links = []
    for first in range(0, boards - 1, 2):
        a_chips = [c for c in cards if c.serial == _board_serial(first)]
        b_chips = [c for c in cards if c.serial == _board_serial(first + 1)]
        links += [MluLinkSpec(a.bdf, b.bdf) for a in a_chips for b in b_chips]
    return NodeSpec(cards=tuple(cards), mlu_links=tuple(links))


def pcie_node(count: int, *, booting: Sequence[int] = (), board: str = "MLU370-S4") -> NodeSpec:
    """``count`` one-chip MLUs, each behind its own root port (no shared switch), the first half on
    NUMA node 0. Cards whose position is in ``booting`` are in ``CN_BOOTING``. Up to 126 cards."""
    if not 0 < count <= 126:
        raise ValueError(f"pcie_node holds 1 to 126 cards, not {count}")
    cards = []
    half = max(1, count // 2)
    for i in range(count):
        cards.append(
            MluSpec(
                bdf=f"0000:{2 + 2 * i:02x}:00.0",
                slot=i,
                board=board,
                serial=f"{0x3700B000 + i:08x}",
                numa_node=0 if i < half else 1,
                core_state="CN_BOOTING" if i in booting else "CN_RUNNING",
                bridges=(f"0000:00:{1 + i // 8:02x}.{i % 8}",),
            )
        )
    return NodeSpec(cards=tuple(cards))
