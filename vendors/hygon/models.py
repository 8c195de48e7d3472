"""PCI device id → DCU model name, from the table Hygon's own tooling keeps (hygon.md §1).

The model comes from the PCI ``device`` file, never from ``hy-smi --showproductname``: that field is
empty on some K100 builds (dcu-vgpu PR #4), and a plugin that failed on a model missing from its
table is dcu-vgpu issue #2. So an unknown id still gives a card (model ``unknown-<id>``), and the
vendor's own override file (``/opt/hyhal/bin/update_ids``, a bash ``declare -A map`` with lines
``map["<devid>"]="<name>"``, which newer dcu-dcgm reads) extends or replaces entries.

The table copies Project-HAMi/dcu-dcgm. Its key ``1d94`` (the vendor id used as a device id, mapped to
K500SM) is left out as noise; the BW200's device id is not in any table read, so it shows as unknown.
CU counts here are informative only: discovery takes the real count from KFD
(``simd_count / simd_per_cu``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

log = logging.getLogger(__name__)

HYGON_PCI_VENDOR = 0x1D94


@dataclass(frozen=True)
class Model:
    """One entry of the device-id table: marketing name and, where the table gives it, CU count."""

    name: str
    compute_units: int | None = None


_K500 = "K500SM"

MODELS: Mapping[int, Model] = MappingProxyType(
    {
        0x54B7: Model("Z100", 60),
        0x55B7: Model("Z100L", 60),
        0x62B7: Model("K100", 120),
        0x6210: Model("K100_AI", 120),
        0x6211: Model("K100_LC_E_AI", 128),
        0x6212: Model("K100_LC_AI", 120),
        0x6213: Model("K100_AI_i"),
        0x62C7: Model("K100-LC"),
        0x51B7: Model("Z200SM_80"),
        0x56B7: Model("Z200SM_81"),
        0x55C7: Model("Z200SM_71"),
        0x55D7: Model("Z200SM_71_S"),
        0x52B7: Model("ZIFANG 8182"),
        0x57B7: Model("ZIFANG 8185"),
        **{
            device: Model(_K500)
            for device in (0x61B7, 0x61D7, 0x61E7, 0x62A0, 0x62B0, 0x61A7, 0x61C7, 0x6214, 0x61F7)
        },
    }
)

_UPDATE_IDS_LINE = re.compile(r'^\s*map\[\s*"?([0-9A-Fa-f]{1,4})"?\s*\]\s*=\s*"([^"]*)"\s*$')


def parse_update_ids(text: str, source: str = "update_ids") -> dict[int, Model]:
    """``map["<devid>"]="<name>"`` lines → models; other lines (``declare -A map``, comments) skipped.

    An entry with an empty name is dropped with a warning naming ``source``: an empty model would be
    worse than the built-in one it replaces.
    """
    found: dict[int, Model] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _UPDATE_IDS_LINE.match(line)
        if match is None:
            continue
        name = match.group(2).strip()
        if not name:
            log.warning("%s:%d: empty model name for device %s ignored", source, number, match.group(1))
            continue
        found[int(match.group(1), 16)] = Model(name)
    return found


def load_update_ids(path: Path) -> dict[int, Model]:
    """The override file at ``path`` (already host_root-prefixed); empty when it does not exist.

    An unreadable file is logged and ignored: model names are cosmetic, and a node must not lose its
    DCUs because a vendor tool left a broken override behind.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    except OSError as err:
        log.warning("%s: cannot read model overrides: %s", path, err)
        return {}
    return parse_update_ids(text, str(path))


@dataclass(frozen=True)
class ModelTable:
    """The built-in table with the vendor's overrides on top."""

    overrides: Mapping[int, Model] = field(default_factory=lambda: MappingProxyType({}))

    def lookup(self, device_id: int) -> Model | None:
        return self.overrides.get(device_id) or MODELS.get(device_id)

    def name(self, device_id: int) -> str:
        model = self.lookup(device_id)
        return model.name if model else f"unknown-{device_id:04x}"

    def knows(self, device_id: int) -> bool:
        return self.lookup(device_id) is not None
