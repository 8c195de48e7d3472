"""Builds a Hygon host's sysfs and /dev under a temp root, in the real layout (hygon.md §2, §8).

What a DCU host has and the backend must read through, all made here:

* ``sys/bus/pci/devices/<bdf>`` → the function under ``sys/devices/pci<d>:<b>/<root port>/<switch
  up>/<switch down>/<bdf>`` (:func:`vendors.pcisysfs.fake.write_pci_function`), with the amdgpu-style
  driver attributes ``serial_number``, ``unique_id``, ``mem_info_vram_total`` and its ``drm/card<N>``
  and ``drm/renderD<M>`` directories, each with ``dev`` and a ``device`` link back;
* ``sys/class/drm/{card<N>,renderD<M>}`` links into those, and ``card0`` of a non-Hygon BMC VGA
  (ASPEED, ``ast``), so Hygon minors do not start at 0;
* Hygon CPU functions of vendor 0x1d94 (host bridge, IOMMU) that are not DCUs;
* ``sys/module/<driver>/{initstate,version}`` and ``drivers/pci:<driver>`` → the PCI driver dir;
* ``sys/class/kfd/kfd/topology`` with CPU nodes (``simd_count 0``) first, then one GPU node per
  bound card with ROCm's property keys, ``mem_banks``, ``io_links`` (PCIe to its CPU node, xGMI type 11
  to its peers; or the xGMI ones in ``p2p_links``);
* ``dev/kfd``, ``dev/mkfd``, ``dev/dri/card<N>``, ``dev/dri/renderD<M>`` (plain files: a test cannot
  make device nodes, and the backend only checks that they exist);
* ``opt/hyhal/`` with ``bin/hy-smi``.

The :class:`FakeHygonNode` mutators do what the kernel does: hot-removal takes the function, its
DRM devices, its ``/dev`` nodes and its KFD node away (KFD renumbers its nodes and bumps
``generation_id``); an unbind keeps the function but drops everything the driver made.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from vendors.hygon.models import HYGON_PCI_VENDOR
from vendors.pcisysfs.fake import bind_driver, remove_pci_function, unbind_driver, write_pci_function
from vendors.pcisysfs.pci import PCI_DEVICES

KFD_TOPOLOGY = "sys/class/kfd/kfd/topology"
CLASS_DRM = "sys/class/drm"
GIB = 1 << 30
K100_AI_VRAM = 65520 * (1 << 20)
DRM_MAJOR = 226


@dataclass(frozen=True)
class DcuSpec:
    """One DCU. ``serial`` may be empty (the file is then empty); ``unique_id`` 0 means no such file."""

    address: str
    card_minor: int
    render_minor: int
    device_id: int = 0x6210
    class_code: int = 0x038000
    numa_node: int = -1
    bridges: tuple[str, ...] = ()
    gpu_id: int = 0
    serial: str = ""
    unique_id: int = 0
    vram_bytes: int = K100_AI_VRAM
    kfd_mem_bank: bool = True
    hive_id: int = 0
    simd_count: int = 480
    simd_per_cu: int = 4
    gfx_target_version: int = 90208


@dataclass(frozen=True)
class HygonNodeSpec:
    """A whole node: its DCUs, the driver, the CPU side and which cards are joined by xGMI."""

    dcus: tuple[DcuSpec, ...]
    driver: str = "hydcu"
    driver_version: str = "6.3.8-V1.9.2"
    cpu_nodes: int = 2
    xgmi: tuple[tuple[int, int], ...] = ()
    xgmi_bandwidth_mbs: int = 50000
    xgmi_in_p2p_links: bool = False
    bmc_vga: bool = True
    hygon_cpu_functions: bool = True
    mkfd: bool = True
    hyhal: bool = True


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def _properties(values: list[tuple[str, int]]) -> str:
    return "".join(f"{k} {v}\n" for k, v in values)


def _location_id(address: str) -> tuple[int, int]:
    domain, bus, rest = address.split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16) << 8 | int(device, 16) << 3 | int(function, 16)


class FakeHygonNode:
    """A written node and the mutators tests drive it with; addresses name the cards."""

    def __init__(self, host_root: Path, spec: HygonNodeSpec) -> None:
        self.host_root = host_root
        self.spec = spec
        self.present: set[str] = set()
        self.bound: set[str] = set()
        self.generation = 0

    # -- queries ----------------------------------------------------------------------------------

    def dcu(self, address: str) -> DcuSpec:
        for dcu in self.spec.dcus:
            if dcu.address == address:
                return dcu
        raise KeyError(f"no DCU {address} in this fake node")

    @property
    def addresses(self) -> list[str]:
        return [d.address for d in self.spec.dcus]

    def function_dir(self, address: str) -> Path:
        return Path(os.path.realpath(self.host_root / PCI_DEVICES / address))

    def kfd_node_dir(self, address: str) -> Path:
        """The KFD node directory of a bound card now (KFD renumbers, so ask after each change)."""
        for position, dcu in enumerate(self._live()):
            if dcu.address == address:
                return self.host_root / KFD_TOPOLOGY / "nodes" / str(self.spec.cpu_nodes + position)
        raise KeyError(f"DCU {address} has no KFD node now")

    # -- whole node -------------------------------------------------------------------------------

    def write(self) -> FakeHygonNode:
        root, spec = self.host_root, self.spec
        if spec.hygon_cpu_functions:
            write_pci_function(
                root,
                "0000:00:00.0",
                vendor_id=HYGON_PCI_VENDOR,
                device_id=0x1450,
                class_code=0x060000,
                numa_node=0,
            )
            write_pci_function(
                root,
                "0000:00:00.2",
                vendor_id=HYGON_PCI_VENDOR,
                device_id=0x1451,
                class_code=0x080600,
                numa_node=0,
            )
        if spec.bmc_vga:
            self._write_bmc()
        module = root / "sys/module" / spec.driver
        _write(module / "initstate", "live\n")
        _write(module / "version", f"{spec.driver_version}\n")
        driver_dir = root / "sys/bus/pci/drivers" / spec.driver
        driver_dir.mkdir(parents=True, exist_ok=True)
        _link(module / "drivers" / f"pci:{spec.driver}", driver_dir)
        for dcu in spec.dcus:
            self._write_function(dcu)
            self._bind(dcu)
        _write(root / "dev/kfd", "")
        if spec.mkfd:
            _write(root / "dev/mkfd", "")
        if spec.hyhal:
            _write(root / "opt/hyhal/bin/hy-smi", "#!/bin/sh\n")
        self._write_kfd()
        return self

    def _write_bmc(self) -> None:
        """An ASPEED BMC VGA as ``card0`` with its ``card0-VGA-1`` connector, and DRM's ``version`` file."""
        root = self.host_root
        address = "0000:00:1e.0"
        directory = write_pci_function(
            root, address, vendor_id=0x1A03, device_id=0x2000, class_code=0x030000, numa_node=0, driver="ast"
        )
        self._write_drm(directory, "card0", 0)
        connector = directory / "drm/card0/card0-VGA-1"
        _write(connector / "status", "connected\n")
        _link(root / CLASS_DRM / "card0-VGA-1", connector)
        _write(root / CLASS_DRM / "version", "drm 1.1.0 20060810\n")
        _write(root / "dev/dri/card0", "")

    def _write_drm(self, function: Path, name: str, minor: int) -> None:
        drm = function / "drm" / name
        _write(drm / "dev", f"{DRM_MAJOR}:{minor}\n")
        device = drm / "device"
        if device.is_symlink():
            device.unlink()
        device.symlink_to(f"../../../{function.name}")  # as sysfs spells it: up past the function, back in
        _link(self.host_root / CLASS_DRM / name, drm)

    def _write_function(self, dcu: DcuSpec) -> None:
        write_pci_function(
            self.host_root,
            dcu.address,
            vendor_id=HYGON_PCI_VENDOR,
            device_id=dcu.device_id,
            class_code=dcu.class_code,
            numa_node=dcu.numa_node,
            bridges=dcu.bridges,
        )
        self.present.add(dcu.address)

    def _bind(self, dcu: DcuSpec) -> None:
        """What the driver's probe makes: the binding, its attributes, DRM devices and /dev nodes."""
        root = self.host_root
        bind_driver(root, dcu.address, self.spec.driver)
        function = self.function_dir(dcu.address)
        _write(function / "serial_number", f"{dcu.serial}\n")
        if dcu.unique_id:
            _write(function / "unique_id", f"{dcu.unique_id:016x}\n")
        _write(function / "mem_info_vram_total", f"{dcu.vram_bytes}\n")
        _write(function / "mem_info_vram_used", "0\n")
        for name, minor in (
            (f"card{dcu.card_minor}", dcu.card_minor),
            (f"renderD{dcu.render_minor}", dcu.render_minor),
        ):
            self._write_drm(function, name, minor)
            _write(root / "dev/dri" / name, "")
        self.bound.add(dcu.address)

    def _unbind(self, dcu: DcuSpec) -> None:
        root = self.host_root
        function = self.function_dir(dcu.address)
        if (root / PCI_DEVICES / dcu.address).exists():
            unbind_driver(root, dcu.address)
            for name in ("serial_number", "unique_id", "mem_info_vram_total", "mem_info_vram_used"):
                (function / name).unlink(missing_ok=True)
            shutil.rmtree(function / "drm", ignore_errors=True)
        for name in (f"card{dcu.card_minor}", f"renderD{dcu.render_minor}"):
            (root / CLASS_DRM / name).unlink(missing_ok=True)
            (root / "dev/dri" / name).unlink(missing_ok=True)
        self.bound.discard(dcu.address)

    # -- KFD --------------------------------------------------------------------------------------

    def _live(self) -> list[DcuSpec]:
        return [d for d in self.spec.dcus if d.address in self.present and d.address in self.bound]

    def _write_kfd(self) -> None:
        """The whole topology for the bound cards now, renumbered as KFD does, generation bumped.

        Built beside the live ``nodes`` and swapped in by two renames, so a reader sees the old or
        the new tree except for a moment with none (as while the kernel rebuilds it).
        """
        topology = self.host_root / KFD_TOPOLOGY
        building, old = topology / "nodes.building", topology / "nodes.old"
        shutil.rmtree(building, ignore_errors=True)
        self.generation += 1
        _write(topology / "system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
        for cpu in range(self.spec.cpu_nodes):
            self._write_cpu_node(building / str(cpu), cpu)
        live = self._live()
        node_of = {d.address: self.spec.cpu_nodes + i for i, d in enumerate(live)}
        peers: dict[str, list[str]] = {}
        for a, b in self.spec.xgmi:
            first, second = self.spec.dcus[a].address, self.spec.dcus[b].address
            peers.setdefault(first, []).append(second)
            peers.setdefault(second, []).append(first)
        for dcu in live:
            links = [node_of[p] for p in peers.get(dcu.address, []) if p in node_of]
            self._write_gpu_node(building / str(node_of[dcu.address]), node_of[dcu.address], dcu, links)
        building.mkdir(parents=True, exist_ok=True)
        if (topology / "nodes").exists():
            (topology / "nodes").rename(old)
        building.rename(topology / "nodes")
        shutil.rmtree(old, ignore_errors=True)
        _write(topology / "generation_id", f"{self.generation}\n")

    def _write_cpu_node(self, directory: Path, index: int) -> None:
        _write(directory / "gpu_id", "0\n")
        _write(directory / "name", "\n")
        props = [
            ("cpu_cores_count", 32),
            ("simd_count", 0),
            ("mem_banks_count", 1),
            ("caches_count", 0),
            ("io_links_count", 0),
            ("p2p_links_count", 0),
            ("cpu_core_id_base", 32 * index),
            ("simd_id_base", 0),
            ("max_waves_per_simd", 0),
            ("lds_size_in_kb", 0),
            ("gds_size_in_kb", 0),
            ("num_gws", 0),
            ("wave_front_size", 0),
            ("array_count", 0),
            ("simd_arrays_per_engine", 0),
            ("cu_per_simd_array", 0),
            ("simd_per_cu", 0),
            ("max_slots_scratch_cu", 0),
            ("gfx_target_version", 0),
            ("vendor_id", 0),
            ("device_id", 0),
            ("location_id", 0),
            ("domain", 0),
            ("drm_render_minor", 0),
            ("hive_id", 0),
            ("num_sdma_engines", 0),
            ("num_sdma_xgmi_engines", 0),
            ("num_sdma_queues_per_engine", 0),
            ("num_cp_queues", 0),
            ("max_engine_clk_ccompute", 2500),
        ]
        _write(directory / "properties", _properties(props))
        _write(
            directory / "mem_banks/0/properties",
            _properties(
                [
                    ("heap_type", 0),
                    ("size_in_bytes", 256 * GIB),
                    ("flags", 0),
                    ("width", 72),
                    ("mem_clk_max", 3200),
                ]
            ),
        )

    def _write_gpu_node(self, directory: Path, index: int, dcu: DcuSpec, xgmi_to: list[int]) -> None:
        domain, location = _location_id(dcu.address)
        _write(directory / "gpu_id", f"{dcu.gpu_id}\n")
        gfx = dcu.gfx_target_version
        _write(directory / "name", f"gfx{gfx // 10000}{(gfx // 100) % 100:x}{gfx % 100:x}\n")
        props = [
            ("cpu_cores_count", 0),
            ("simd_count", dcu.simd_count),
            ("mem_banks_count", 1 if dcu.kfd_mem_bank else 0),
            ("caches_count", 96),
            ("io_links_count", 1 + (0 if self.spec.xgmi_in_p2p_links else len(xgmi_to))),
            ("p2p_links_count", len(xgmi_to) if self.spec.xgmi_in_p2p_links else 0),
            ("cpu_core_id_base", 0),
            ("simd_id_base", 2147487744 + 16 * index),
            ("max_waves_per_simd", 10),
            ("lds_size_in_kb", 64),
            ("gds_size_in_kb", 0),
            ("num_gws", 64),
            ("wave_front_size", 64),
            ("array_count", 8),
            ("simd_arrays_per_engine", 1),
            ("cu_per_simd_array", 15),
            ("simd_per_cu", dcu.simd_per_cu),
            ("max_slots_scratch_cu", 32),
            ("gfx_target_version", gfx),
            ("vendor_id", HYGON_PCI_VENDOR),
            ("device_id", dcu.device_id),
            ("location_id", location),
            ("domain", domain),
            ("drm_render_minor", dcu.render_minor),
            ("hive_id", dcu.hive_id),
            ("num_sdma_engines", 2),
            ("num_sdma_xgmi_engines", 3),
            ("num_sdma_queues_per_engine", 8),
            ("num_cp_queues", 24),
            ("max_engine_clk_fcompute", 1500),
            ("local_mem_size", 0),
            ("fw_version", 392),
            ("capability", 8832),
            ("debug_prop", 470),
            ("sdma_fw_version", 421),
            ("unique_id", dcu.unique_id),
            ("num_xcc", 1),
            ("max_engine_clk_ccompute", 3200),
        ]
        _write(directory / "properties", _properties(props))
        if dcu.kfd_mem_bank:
            _write(
                directory / "mem_banks/0/properties",
                _properties(
                    [
                        ("heap_type", 1),
                        ("size_in_bytes", dcu.vram_bytes),
                        ("flags", 0),
                        ("width", 4096),
                        ("mem_clk_max", 1200),
                    ]
                ),
            )
        cpu = dcu.numa_node if 0 <= dcu.numa_node < self.spec.cpu_nodes else 0
        self._write_link(directory / "io_links/0", 2, index, cpu, 20, 0)
        kind = "p2p_links" if self.spec.xgmi_in_p2p_links else "io_links"
        first = 0 if self.spec.xgmi_in_p2p_links else 1
        for offset, peer in enumerate(sorted(xgmi_to)):
            self._write_link(
                directory / kind / str(first + offset), 11, index, peer, 15, self.spec.xgmi_bandwidth_mbs
            )

    @staticmethod
    def _write_link(
        directory: Path, link_type: int, node_from: int, node_to: int, weight: int, bandwidth: int
    ) -> None:
        props = [
            ("type", link_type),
            ("version_major", 0),
            ("version_minor", 0),
            ("node_from", node_from),
            ("node_to", node_to),
            ("weight", weight),
            ("min_latency", 0),
            ("max_latency", 0),
            ("min_bandwidth", bandwidth // 2 if bandwidth else 312),
            ("max_bandwidth", bandwidth or 64000),
            ("recommended_transfer_size", 0),
            ("recommended_sdma_engine_id_mask", 0),
            ("flags", 1),
        ]
        _write(directory / "properties", _properties(props))

    # -- mutators ---------------------------------------------------------------------------------

    def remove_card(self, address: str) -> None:
        """Hot-removal: function, driver links, DRM devices, /dev nodes and KFD node all go."""
        dcu = self.dcu(address)
        self._unbind(dcu)
        remove_pci_function(self.host_root, address)
        self.present.discard(address)
        self._write_kfd()

    def restore_card(self, address: str) -> None:
        """The card comes back (rescan after a hot-add), bound to the driver, same minors."""
        dcu = self.dcu(address)
        self._write_function(dcu)
        self._bind(dcu)
        self._write_kfd()

    def add_card(self, dcu: DcuSpec) -> None:
        """A card this node did not have before appears, bound."""
        self.spec = replace(self.spec, dcus=(*self.spec.dcus, dcu))
        self.restore_card(dcu.address)

    def plug_card(self, dcu: DcuSpec) -> None:
        """A card this node did not have before appears with its driver still probing: the PCI function
        only, no binding, DRM minors or KFD node yet; :meth:`bind` finishes the probe."""
        self.spec = replace(self.spec, dcus=(*self.spec.dcus, dcu))
        self._write_function(dcu)

    def unbind(self, address: str) -> None:
        """``echo <bdf> > .../drivers/<driver>/unbind``: the function stays, what the driver made goes."""
        self._unbind(self.dcu(address))
        self._write_kfd()

    def bind(self, address: str, card_minor: int | None = None, render_minor: int | None = None) -> None:
        """Bind again, with the same minors unless others are given (the driver may renumber)."""
        dcu = self.dcu(address)
        if card_minor is not None or render_minor is not None:
            dcu = replace(
                dcu, card_minor=card_minor or dcu.card_minor, render_minor=render_minor or dcu.render_minor
            )
            self.spec = replace(
                self.spec, dcus=tuple(dcu if d.address == address else d for d in self.spec.dcus)
            )
        self._bind(dcu)
        self._write_kfd()

    def set_initstate(self, state: str) -> None:
        _write(self.host_root / "sys/module" / self.spec.driver / "initstate", f"{state}\n")

    def corrupt(self, path: Path, content: str) -> Path:
        """Overwrite one file (absolute, or relative to the host root) with ``content``; returns its path."""
        target = path if path.is_absolute() else self.host_root / path
        target.write_text(content)
        return target


def write_hygon_node(host_root: Path, spec: HygonNodeSpec) -> FakeHygonNode:
    """Write ``spec`` under ``host_root``; the returned node drives hot-removal, unbinds and faults."""
    return FakeHygonNode(host_root, spec).write()


@dataclass(frozen=True)
class _Slot:
    address: str
    bridges: tuple[str, ...]
    numa_node: int


def _slots(count: int, per_switch: int, sockets: int = 2) -> list[_Slot]:
    """Cards behind PCIe switches (``per_switch`` each), the switches split over ``sockets`` NUMA nodes."""
    switches = max(1, -(-count // per_switch))
    stride = 0x100 // max(switches, 1)
    slots = []
    for card in range(count):
        switch, port = divmod(card, per_switch)
        root_bus = switch * stride
        bridges = (
            f"0000:{root_bus:02x}:01.1",
            f"0000:{root_bus + 1:02x}:00.0",
            f"0000:{root_bus + 2:02x}:{port:02x}.0",
        )
        numa = switch * sockets // switches
        slots.append(_Slot(f"0000:{root_bus + 3 + port:02x}:00.0", bridges, numa))
    return slots


def _dcus(slots: list[_Slot], hive_of: list[int] | None = None) -> list[DcuSpec]:
    found = []
    for i, slot in enumerate(slots):
        found.append(
            DcuSpec(
                address=slot.address,
                card_minor=1 + i,
                render_minor=128 + i,
                numa_node=slot.numa_node,
                bridges=slot.bridges,
                gpu_id=13261 + 4099 * i,
                serial=f"TPXS32{i:010d}",
                unique_id=0x3A5C_0000_0000_0000 + 0x1_0001 * (i + 1),
                hive_id=(0x5EED_0000_0000 + hive_of[i]) if hive_of is not None else 0,
            )
        )
    return found


def xgmi_node(count: int = 8, hives: int = 1) -> HygonNodeSpec:
    """``count`` K100_AI DCUs on two NUMA nodes behind two PCIe switches, all-to-all xGMI in each hive.

    Card ``i`` is in hive ``i % hives``, so with ``hives=2`` the hives interleave the switches: a
    PCIe-only choice (one switch) and an xGMI choice (one hive) differ, and a test can tell them apart.
    Quirks of real hosts on purpose: the last card's ``numa_node`` is ``-1``, card 3 has an empty
    ``serial_number`` (its id falls back to ``unique_id``), card 5 has no KFD memory bank (memory from
    ``mem_info_vram_total``), and ``card0`` is a BMC VGA.
    """
    hive_of = [i % hives for i in range(count)]
    dcus = _dcus(_slots(count, max(1, -(-count // 2))), hive_of)
    if count > 3:
        dcus[3] = replace(dcus[3], serial="")
    if count > 5:
        dcus[5] = replace(dcus[5], kfd_mem_bank=False, vram_bytes=64 * GIB)
    if count > 1:
        dcus[-1] = replace(dcus[-1], numa_node=-1)
    pairs = tuple((a, b) for a in range(count) for b in range(a + 1, count) if hive_of[a] == hive_of[b])
    return HygonNodeSpec(dcus=tuple(dcus), xgmi=pairs)


def pcie_node(count: int) -> HygonNodeSpec:
    """``count`` DCUs (up to 64, as the bench uses) on PCIe only: four per switch, two NUMA nodes."""
    if not 1 <= count <= 64:
        raise ValueError(f"pcie_node holds 1..64 DCUs, not {count}")
    return HygonNodeSpec(dcus=tuple(_dcus(_slots(count, 4))))
