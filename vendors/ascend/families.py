"""Chip families: how to tell them apart, and what each one has (ascend.md §2.4, §2.6, §3).

The family decides the memory call (HBM on the 910 line, DDR on the 310 line), whether the HCCS
topology query works (910B and A3 only), the HCCS grouping rules of Huawei's scheduler (§3.3) and the
vNPU templates the driver accepts (§2.6).

Decisions where the facts are open (ascend.md §8):
- A3 is recognised by board id (§2.4) only when the chip name does not say 310-anything: the exact A3
  chip name is unverified, and a 310 card must never become an A3 because of a colliding board id.
- 910B templates depend on the bin/SKU, whose mapping is unverified. We follow HAMi's per-SKU table
  (910B2, 910B3, 910B4, 910B4-1) and offer the union of every 910B template for other 910B names; the
  driver refuses a template a bin lacks, and that refusal reaches the pool as the layout error.
- No template list for A3 is published (HAMi#2842 shows vNPUs exist there), so A3 and the 310/310B
  families offer none and a vNPU pool on them gets a clear "no vNPU templates" error.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from vendors.ascend import abi


class Family(enum.StrEnum):
    """MindX's DevType names; ``Ascend910`` is the A1 ("910A") generation."""

    ASCEND310 = "Ascend310"
    ASCEND310B = "Ascend310B"
    ASCEND310P = "Ascend310P"
    ASCEND910 = "Ascend910"
    ASCEND910B = "Ascend910B"
    ASCEND910A3 = "Ascend910A3"
    ASCEND950 = "Ascend950"
    UNKNOWN = "Unknown"


_310P = re.compile(r"^(310P\d?|I2\d?)")
_910B = re.compile(r"^(910B\d|A2G\d)")


def family_of(chip_name: str, board_id: int | None) -> Family:
    """MindX's ``GetDeviceTypeByChipName`` order, then the A3 board ids (§2.4)."""
    name = chip_name.strip()
    if name.startswith("Ascend950"):
        return Family.ASCEND950
    if _310P.match(name):
        return Family.ASCEND310P
    if "310B" in name:
        return Family.ASCEND310B
    if "310" in name:
        return Family.ASCEND310
    if board_id is not None and board_id in abi.A3_BOARD_IDS:
        return Family.ASCEND910A3
    if _910B.match(name):
        return Family.ASCEND910B
    if name.startswith("910"):
        return Family.ASCEND910
    return Family.UNKNOWN


HBM_FAMILIES = frozenset({Family.ASCEND910, Family.ASCEND910B, Family.ASCEND910A3, Family.ASCEND950})
"""Families whose memory is HBM (``dcmi_get_device_hbm_info``); the rest use ``memory_info_v3``."""

TOPOLOGY_QUERY_FAMILIES = frozenset({Family.ASCEND910B, Family.ASCEND910A3})
"""Where ``dcmi_get_topo_info_by_device_id`` works; other chips answer -8255 (§2.7)."""


# -- vNPU templates (§2.6) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A vNPU template: AI cores, AI CPUs and memory (GB, 0 when neither name nor facts say)."""

    name: str
    ai_cores: int
    ai_cpus: int
    memory_gb: int

    @property
    def resource_suffix(self) -> str:
        """MindX's resource-name suffix (§3.2): ``vir05_1c_16g`` → ``5c.1cpu.16g``."""
        parts = [f"{self.ai_cores}c"]
        if self.ai_cpus:
            parts.append(f"{self.ai_cpus}cpu")
        match = _TEMPLATE.match(self.name)
        if match and match.group("gb"):
            parts.append(f"{match.group('gb')}g")
        flag = match.group("flag") if match else None
        if flag in ("ndvpp", "nm"):
            parts.append("ndvpp")
        elif flag in ("dvpp", "m"):
            parts.append("dvpp")
        return ".".join(parts)


_TEMPLATE = re.compile(
    r"^vir(?P<cores>\d{2})(?:_(?P<cpus>\d+)c)?(?:_(?P<gb>\d+)g)?(?:_(?P<flag>m|nm|dvpp|ndvpp))?$"
)


def parse_template(name: str, memory_gb: int = 0) -> Template:
    """``virNN[_Mc][_Gg][_m|_nm|_dvpp|_ndvpp]``; ValueError for anything else."""
    match = _TEMPLATE.match(name)
    if match is None:
        raise ValueError(f"{name!r} is not a vNPU template name (virNN[_Mc][_Gg][_flag])")
    gb = int(match.group("gb")) if match.group("gb") else memory_gb
    return Template(name, int(match.group("cores")), int(match.group("cpus") or 0), gb)


def _templates(*items: tuple[str, int]) -> dict[str, Template]:
    return {name: parse_template(name, gb) for name, gb in items}


# 310P: aicore 1/2/2/4/4/4/4 of 8; memory of the 24 GB part 3/6/6/12/12/12/12 GB.
_310P_TEMPLATES = _templates(
    ("vir01", 3),
    ("vir02", 6),
    ("vir02_1c", 6),
    ("vir04", 12),
    ("vir04_3c", 12),
    ("vir04_3c_ndvpp", 12),
    ("vir04_4c_dvpp", 12),
)
# 910 (A1): aicore 2/4/8/16; memory 2/4/8/16 GB on the 32 GB part.
_910_TEMPLATES = _templates(("vir02", 2), ("vir04", 4), ("vir08", 8), ("vir16", 16))
# 910B by SKU as HAMi configures it, and every template of any 910B bin for the others.
_910B_BY_NAME: dict[str, dict[str, Template]] = {
    "910B2": _templates(("vir03_1c_8g", 0), ("vir06_1c_16g", 0), ("vir12_3c_32g", 0)),
    "910B3": _templates(("vir05_1c_16g", 0), ("vir10_3c_32g", 0)),
    "910B4-1": _templates(("vir05_1c_16g", 0), ("vir10_3c_32g", 0)),
    "910B4": _templates(("vir05_1c_8g", 0), ("vir10_3c_16g", 0)),
}
_910B_ALL = _templates(
    ("vir12_3c_32g", 0),
    ("vir06_1c_16g", 0),
    ("vir10_3c_32g", 0),
    ("vir05_1c_16g", 0),
    ("vir10_3c_16g", 0),
    ("vir10_4c_16g_m", 0),
    ("vir10_3c_16g_nm", 0),
    ("vir05_1c_8g", 0),
    ("vir03_1c_8g", 0),
)


def templates_for(family: Family, chip_name: str) -> dict[str, Template]:
    """The vNPU templates a chip of ``family`` named ``chip_name`` offers (empty: no vNPU)."""
    if family is Family.ASCEND310P:
        return dict(_310P_TEMPLATES)
    if family is Family.ASCEND910:
        return dict(_910_TEMPLATES)
    if family is Family.ASCEND910B:
        return dict(_910B_BY_NAME.get(chip_name.strip(), _910B_ALL))
    return {}


def capacity(template: Template, ai_cores: float, memory_mb: int) -> int:
    """How many vNPUs of ``template`` fit in ``ai_cores`` cores (and ``memory_mb``, when both known)."""
    if template.ai_cores <= 0:
        return 0
    fit = int(ai_cores // template.ai_cores)
    if template.memory_gb and memory_mb > 0:
        fit = min(fit, memory_mb // (template.memory_gb * 1024))
    return max(fit, 0)


# -- HCCS rules of Huawei's scheduler (§3.3) --------------------------------------------------------


@dataclass(frozen=True)
class GroupRule:
    """How a family's chips group for collectives when DCMI cannot tell us (or as the base).

    ``group_of(phy_id)``: the HCCS group by phy id, or None when the family has no HCCS.
    ``sizes``: request sizes the family's scheduler uses (``linkGroupSizes``). Chips of one group are
    a full HCCS mesh in every family that has groups (an A1 ring of 4 is one too).
    """

    group_size: int
    sizes: tuple[int, ...]

    def group_of(self, phy_id: int) -> str | None:
        if self.group_size <= 0:
            return None
        return str(phy_id // self.group_size)


def group_rule(family: Family, chips_on_node: int) -> GroupRule:
    """A1: rings of 4 (1, 2, 4 or 8); 910B: meshes of 8 (x16 nodes: two); A3: one 16-die domain.

    A3 (``module910a3x16``) takes 1 or any even count up to 16 (two dies of a module go
    together), so every even size is declared: the allocator keeps room for each of them.
    """
    if family is Family.ASCEND910:
        return GroupRule(4, (1, 2, 4, 8))
    if family is Family.ASCEND910B:
        return GroupRule(8, (1, 2, 4, 8) if chips_on_node <= 8 else (1, 2, 4, 8, 16))
    if family is Family.ASCEND910A3:
        return GroupRule(16, (1, *range(2, 17, 2)))
    return GroupRule(0, ())
