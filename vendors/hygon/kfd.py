"""The KFD topology (``/sys/class/kfd/kfd/topology/nodes/<n>/``): GPU nodes, their facts and links.

Hygon's driver is KFD-derived, so the layout is ROCm's (hygon.md §2.4): per node ``gpu_id``, ``name``,
a ``properties`` file of ``key value`` integer lines, ``mem_banks/<m>/properties`` and
``io_links/<l>/properties`` (``p2p_links`` on newer kernels). CPU nodes have ``simd_count 0``; a
node is a GPU when ``simd_count > 0`` or ``drm_render_minor > 0`` (HAMi and ROCm use one each).

Node numbers ``<n>`` are only what ``io_links`` refer to: KFD renumbers its nodes when a GPU goes,
so a node is matched to a PCI function by ``drm_render_minor`` and by the BDF that ``domain`` and
``location_id`` spell, never by position. Whether Hygon's KFD fills ``unique_id``, ``hive_id`` and
``domain`` is unverified: all three are optional here (``domain`` absent means 0, as on old kernels).

A malformed node marks only its card: when the lines naming the card (``drm_render_minor``,
``location_id``) still parse, the error is attributed to it; otherwise it is kept as an
unattributed error that every card without a KFD node reports. Links are topology hints only, so a
malformed link file is logged and skipped rather than failing a card.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

from vendors.pcisysfs.files import SysfsFileError, parse_key_values, read_int, read_text

log = logging.getLogger(__name__)

TOPOLOGY = "sys/class/kfd/kfd/topology"
NODES = f"{TOPOLOGY}/nodes"
KFD_CLASS = "sys/class/kfd"

LINK_TYPE_PCIE = 2
LINK_TYPE_XGMI = 11
HEAP_FB_PUBLIC = 1
HEAP_FB_PRIVATE = 2


def location_bdf(domain: int, location_id: int) -> str:
    """The PCI address KFD encodes as ``location_id = bus << 8 | device << 3 | function``."""
    bus = (location_id >> 8) & 0xFF
    device = (location_id >> 3) & 0x1F
    function = location_id & 0x7
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function}"


@dataclass(frozen=True)
class KfdLink:
    """One ``io_links``/``p2p_links`` entry; ``max_bandwidth`` is in MB/s as KFD reports it (0: unknown)."""

    link_type: int
    node_from: int
    node_to: int
    weight: int = 0
    max_bandwidth: int = 0


@dataclass(frozen=True)
class KfdNode:
    """One topology node. ``error`` is set when one of its files was unreadable or malformed."""

    index: int
    path: Path
    gpu_id: int = 0
    name: str = ""
    properties: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    vram_bytes: int | None = None
    links: tuple[KfdLink, ...] = ()
    error: SysfsFileError | None = None

    @property
    def is_gpu(self) -> bool:
        return self.properties.get("simd_count", 0) > 0 or self.properties.get("drm_render_minor", 0) > 0

    @property
    def render_minor(self) -> int | None:
        minor = self.properties.get("drm_render_minor")
        return minor if minor else None

    @property
    def bdf(self) -> str | None:
        location = self.properties.get("location_id")
        if not location:
            return None
        return location_bdf(self.properties.get("domain", 0), location)

    @property
    def compute_units(self) -> int | None:
        simds = self.properties.get("simd_count", 0)
        per_cu = self.properties.get("simd_per_cu", 0)
        return simds // per_cu if simds > 0 and per_cu > 0 else None

    @property
    def gfx_target(self) -> str | None:
        """``gfx_target_version`` 90010 → ``gfx90a`` style: major, minor and stepping in hex digits."""
        version = self.properties.get("gfx_target_version")
        if not version:
            return None
        major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
        return f"gfx{major}{minor:x}{stepping:x}"


@dataclass(frozen=True)
class KfdTopology:
    """Every node KFD lists now. ``present`` is False when there is no KFD (driver not loaded)."""

    present: bool = False
    nodes: tuple[KfdNode, ...] = ()

    @property
    def gpus(self) -> tuple[KfdNode, ...]:
        return tuple(n for n in self.nodes if n.is_gpu)

    def by_index(self) -> dict[int, KfdNode]:
        return {n.index: n for n in self.nodes}

    @cached_property
    def _by_bdf(self) -> dict[str, KfdNode]:
        found: dict[str, KfdNode] = {}
        for node in self.nodes:
            if node.bdf is not None:
                found.setdefault(node.bdf, node)
        return found

    @cached_property
    def _by_render_minor(self) -> dict[int, KfdNode]:
        found: dict[int, KfdNode] = {}
        for node in self.nodes:
            if node.bdf is None and node.render_minor is not None:
                found.setdefault(node.render_minor, node)
        return found

    def gpu_for(self, bdf: str, render_minor: int | None) -> KfdNode | None:
        """The node of the card at ``bdf``: by BDF where KFD spells one, else by render minor."""
        node = self._by_bdf.get(bdf)
        if node is None and render_minor is not None:
            node = self._by_render_minor.get(render_minor)
        return node

    def unattributed_errors(self) -> tuple[SysfsFileError, ...]:
        """Errors of nodes whose card cannot be told (neither BDF nor render minor readable)."""
        return tuple(
            n.error for n in self.nodes if n.error is not None and n.bdf is None and n.render_minor is None
        )


def _integers(text: str, path: Path) -> tuple[dict[str, int], SysfsFileError | None]:
    """``key value`` lines as integers; the first bad line is returned as the error, the rest kept."""
    values: dict[str, int] = {}
    error: SysfsFileError | None = None
    for key, raw in parse_key_values(text, " ").items():
        try:
            values[key] = int(raw, 10)
        except ValueError:
            if error is None:
                error = SysfsFileError(path, f"{key}: not an integer: {raw[:40]!r}")
    return values, error


def read_properties(path: Path) -> dict[str, int]:
    """A ``properties`` file that must be entirely well-formed (links, memory banks)."""
    values, error = _integers(read_text(path), path)
    if error is not None:
        raise error
    return values


def _vram_bytes(node_dir: Path) -> int | None:
    """Sum of the framebuffer banks' ``size_in_bytes``; None when no bank states one."""
    banks = node_dir / "mem_banks"
    if not banks.is_dir():
        return None
    total = 0
    found = False
    for bank in sorted(banks.iterdir(), key=lambda p: p.name):
        props = read_properties(bank / "properties")
        if props.get("heap_type") in (HEAP_FB_PUBLIC, HEAP_FB_PRIVATE) and props.get("size_in_bytes", 0) > 0:
            total += props["size_in_bytes"]
            found = True
    return total if found else None


def _links(node_dir: Path) -> tuple[KfdLink, ...]:
    found: list[KfdLink] = []
    for kind in ("io_links", "p2p_links"):
        directory = node_dir / kind
        if not directory.is_dir():
            continue
        for entry in sorted(directory.iterdir(), key=lambda p: p.name):
            try:
                props = read_properties(entry / "properties")
                found.append(
                    KfdLink(
                        link_type=props["type"],
                        node_from=props["node_from"],
                        node_to=props["node_to"],
                        weight=props.get("weight", 0),
                        max_bandwidth=props.get("max_bandwidth", 0),
                    )
                )
            except SysfsFileError as err:
                log.warning("KFD link skipped: %s", err)
            except KeyError as missing:
                log.warning("KFD link skipped: %s: no %s line", entry / "properties", missing)
    return tuple(found)


def _read_node(node_dir: Path, index: int, details: bool) -> KfdNode:
    props_path = node_dir / "properties"
    try:
        properties, error = _integers(read_text(props_path), props_path)
    except SysfsFileError as err:
        return KfdNode(index, node_dir, error=err)
    node = KfdNode(index, node_dir, properties=MappingProxyType(properties), error=error)
    if error is not None:
        return node
    try:
        gpu_id = read_int(node_dir / "gpu_id", 10)
        if not details:
            return KfdNode(index, node_dir, gpu_id, properties=node.properties)
        name = read_text(node_dir / "name") if (node_dir / "name").exists() else ""
        vram = _vram_bytes(node_dir) if node.is_gpu else None
    except SysfsFileError as err:
        return KfdNode(index, node_dir, properties=node.properties, error=err)
    return KfdNode(index, node_dir, gpu_id, name, node.properties, vram, _links(node_dir))


def read_topology(host_root: Path, details: bool = True) -> KfdTopology:
    """All nodes, numerically ordered. ``details=False`` (health checks) skips names, banks and links."""
    nodes_dir = host_root / NODES
    if not nodes_dir.is_dir():
        return KfdTopology(present=(host_root / KFD_CLASS).is_dir())
    nodes: list[KfdNode] = []
    for entry in nodes_dir.iterdir():
        if entry.name.isdigit() and entry.is_dir():
            nodes.append(_read_node(entry, int(entry.name), details))
    return KfdTopology(present=True, nodes=tuple(sorted(nodes, key=lambda n: n.index)))
