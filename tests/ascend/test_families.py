"""Chip families from DCMI names and board ids, vNPU template names and capacities (§2.4, §2.6, §3)."""

from __future__ import annotations

import pytest

from vendors.ascend.families import Family, capacity, family_of, group_rule, parse_template, templates_for


@pytest.mark.parametrize(
    ("chip_name", "board_id", "family"),
    [
        ("910B3", 0x24, Family.ASCEND910B),
        ("910B4-1", None, Family.ASCEND910B),
        ("A2G1", None, Family.ASCEND910B),
        ("910A", 0x01, Family.ASCEND910),
        ("910", None, Family.ASCEND910),
        ("Ascend910", 0xB0, Family.ASCEND910A3),
        ("Ascend910", 0xD3, Family.ASCEND910A3),
        ("Ascend910", 0x24, Family.UNKNOWN),
        ("310P3", 0xB0, Family.ASCEND310P),  # a 310 never becomes an A3 through its board id
        ("I21", None, Family.ASCEND310P),
        ("310B4", None, Family.ASCEND310B),
        ("310", None, Family.ASCEND310),
        ("Ascend950PR", None, Family.ASCEND950),
        ("", None, Family.UNKNOWN),
    ],
)
def test_family_of(chip_name: str, board_id: int | None, family: Family) -> None:
    assert family_of(chip_name, board_id) is family


@pytest.mark.parametrize(
    ("name", "cores", "cpus", "gb", "suffix"),
    [
        ("vir02", 2, 0, 0, "2c"),
        ("vir02_1c", 2, 1, 0, "2c.1cpu"),
        ("vir05_1c_16g", 5, 1, 16, "5c.1cpu.16g"),
        ("vir04_3c_ndvpp", 4, 3, 0, "4c.3cpu.ndvpp"),
        ("vir04_4c_dvpp", 4, 4, 0, "4c.4cpu.dvpp"),
        ("vir10_3c_16g_nm", 10, 3, 16, "10c.3cpu.16g.ndvpp"),
        ("vir10_4c_16g_m", 10, 4, 16, "10c.4cpu.16g.dvpp"),
    ],
)
def test_template_names_read_as_mindx_reads_them(
    name: str, cores: int, cpus: int, gb: int, suffix: str
) -> None:
    template = parse_template(name)
    assert (template.ai_cores, template.ai_cpus, template.memory_gb) == (cores, cpus, gb)
    assert template.resource_suffix == suffix


@pytest.mark.parametrize("name", ["vir5", "vir05_", "VIR05", "vir05_1c_16g_x", "npu-core"])
def test_malformed_template_names_are_errors(name: str) -> None:
    with pytest.raises(ValueError, match="not a vNPU template name"):
        parse_template(name)


def test_templates_per_family_and_sku() -> None:
    assert list(templates_for(Family.ASCEND910, "910A")) == ["vir02", "vir04", "vir08", "vir16"]
    assert list(templates_for(Family.ASCEND910B, "910B4")) == ["vir05_1c_8g", "vir10_3c_16g"]
    assert list(templates_for(Family.ASCEND910B, "910B3")) == ["vir05_1c_16g", "vir10_3c_32g"]
    assert len(templates_for(Family.ASCEND910B, "910B1")) == 9, "unknown bin: every 910B template"
    assert len(templates_for(Family.ASCEND310P, "310P3")) == 7
    assert templates_for(Family.ASCEND310P, "310P3")["vir04"].memory_gb == 12
    for family in (Family.ASCEND910A3, Family.ASCEND310, Family.ASCEND310B, Family.UNKNOWN):
        assert templates_for(family, "") == {}


@pytest.mark.parametrize(
    ("name", "cores", "memory_mb", "fit"),
    [
        ("vir05_1c_16g", 20, 65536, 4),
        ("vir05_1c_16g", 20, 40000, 2),  # memory-bound
        ("vir05_1c_16g", 20, 0, 4),  # memory unknown: cores only
        ("vir10_3c_32g", 9.5, 65536, 0),
    ],
)
def test_capacity(name: str, cores: float, memory_mb: int, fit: int) -> None:
    assert capacity(parse_template(name), cores, memory_mb) == fit


def test_group_rules_of_the_scheduler() -> None:
    a1 = group_rule(Family.ASCEND910, 8)
    assert [a1.group_of(p) for p in range(8)] == ["0"] * 4 + ["1"] * 4 and a1.sizes == (1, 2, 4, 8)
    assert group_rule(Family.ASCEND910B, 16).sizes == (1, 2, 4, 8, 16)
    assert group_rule(Family.ASCEND910B, 16).group_of(9) == "1"
    assert group_rule(Family.ASCEND910A3, 16).sizes == (1, 2, 4, 6, 8, 10, 12, 14, 16), "1 or even"
    assert group_rule(Family.ASCEND310P, 4).group_of(0) is None
