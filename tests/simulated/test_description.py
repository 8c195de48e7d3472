"""Parsing node descriptions: the shipped ones parse, and every mistake names its field path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hcs_deviceplugin.backend import BackendAbsent
from hcs_deviceplugin.model import Health, LinkKind
from tests.simulated.conftest import card
from vendors.simulated import (
    NodeDescriptionError,
    builtin_node_names,
    load_builtin_node,
    load_node_description,
    parse_node_description,
)

H100 = "NVIDIA H100 80GB HBM3"


def test_builtin_names_list_default_and_examples() -> None:
    names = builtin_node_names()
    assert names[0] == "default"
    assert {"two-gpus", "eight-gpu-nvlink", "flaky-gpu"} <= set(names)


@pytest.mark.parametrize("name", builtin_node_names())
def test_every_builtin_node_parses(name: str) -> None:
    node = load_builtin_node(name)
    assert node.cards
    assert node.source == f"builtin:{name}"


def test_default_node_is_the_heterogeneous_showcase() -> None:
    node = load_builtin_node("default")
    by_vendor: dict[str, list[str]] = {}
    for c in node.cards:
        by_vendor.setdefault(c.vendor, []).append(c.model)
    assert by_vendor == {
        "nvidia": [H100] * 4,
        "ascend": ["Ascend 910B3"] * 2,
        "hygon": ["K100_AI"] * 2,
        "cambricon": ["MLU370-X8"] * 2,
    }
    h100 = [c for c in node.cards if c.vendor == "nvidia"]
    assert [c.numa_node for c in h100] == [0, 0, 1, 1]
    assert {(c.pci_vendor_id, c.pci_device_id, c.memory_mib) for c in h100} == {(0x10DE, 0x2330, 81559)}
    assert [c.index for c in node.cards] == list(range(10))
    mig = [c for c in node.cards if c.profiles]
    assert len(mig) == 1
    assert mig[0].profiles["1g.10gb"].max_count == 7
    assert mig[0].profiles["3g.40gb"].max_count == 2
    assert node.events == (), "the default node scripts no events; simulate injects its own"
    kinds = {s.link.kind for s in node.links}
    assert kinds == {LinkKind.NVLINK, LinkKind.HCCS, LinkKind.XGMI, LinkKind.MLU_LINK}
    nvlink_pairs = {frozenset((s.a, s.b)) for s in node.links if s.link.kind is LinkKind.NVLINK}
    assert len(nvlink_pairs) == 6, "four H100 all-to-all"


def test_eight_gpu_node_is_fully_connected() -> None:
    node = load_builtin_node("eight-gpu-nvlink")
    assert len(node.cards) == 8
    assert len({frozenset((s.a, s.b)) for s in node.links}) == 28
    assert [c.numa_node for c in node.cards] == [0] * 4 + [1] * 4


def test_defaults_index_is_position_and_optional_fields_empty() -> None:
    node = parse_node_description({"cards": [card("a"), card("b", index=7), card("c")]})
    assert [c.index for c in node.cards] == [0, 7, 2]
    a = node.cards[0]
    assert (a.pci_address, a.pci_vendor_id, a.numa_node, a.memory_mib) == ("", 0, None, 0)
    assert node.node is None
    assert node.links == () and node.events == ()


def test_full_card_fields() -> None:
    node = parse_node_description(
        {
            "node": "n1",
            "cards": [
                card(
                    "GPU-1",
                    pciAddress="0000:3B:00.0",
                    pciVendorId=0x10DE,
                    pciDeviceId=0x2330,
                    numa=1,
                    memoryMiB=100,
                    attributes={"formFactor": "SXM5"},
                    partitionProfiles={"1g.10gb": 7, "3g.40gb": {"max": 2, "memoryMiB": 40448}},
                    partitions=[
                        {"id": "MIG-1", "profile": "1g.10gb", "memoryMiB": 9856},
                        {"id": "MIG-2", "profile": "3g.40gb"},
                    ],
                )
            ],
        }
    )
    c = node.cards[0]
    assert node.node == "n1"
    assert c.pci_address == "0000:3b:00.0", "PCI addresses are normalised to sysfs lower case"
    assert (c.pci_vendor_id, c.pci_device_id, c.numa_node, c.memory_mib) == (0x10DE, 0x2330, 1, 100)
    assert dict(c.attributes) == {"formFactor": "SXM5"}
    assert c.profiles["1g.10gb"].max_count == 7 and c.profiles["1g.10gb"].memory_mib == 0
    assert c.profiles["3g.40gb"].memory_mib == 40448
    assert [(p.id, p.profile, p.memory_mib) for p in c.partitions] == [
        ("MIG-1", "1g.10gb", 9856),
        ("MIG-2", "3g.40gb", 40448),
    ]


def test_events_are_sorted_by_time() -> None:
    node = parse_node_description(
        {
            "cards": [card("a")],
            "events": [
                {"after": 2, "device": "a", "health": "Healthy"},
                {"after": 0.5, "device": "a", "health": "Unhealthy", "reason": "XID 79"},
            ],
        }
    )
    assert [(e.after, e.event.health, e.event.reason) for e in node.events] == [
        (0.5, Health.UNHEALTHY, "XID 79"),
        (2.0, Health.HEALTHY, ""),
    ]


def _with(**card_fields: Any) -> dict[str, Any]:
    return {"cards": [card("a", **card_fields), card("b")]}


STRICT_CASES: list[tuple[str, object, str, str]] = [
    ("empty document", None, "<document>", "empty"),
    ("not a mapping", ["a"], "<document>", "expected a mapping"),
    ("unknown top-level key", {"cards": [], "nodes": 1}, "nodes", "unknown field"),
    ("cards missing", {"node": "x"}, "cards", "required"),
    ("cards not a list", {"cards": {"a": 1}}, "cards", "expected a list"),
    ("unknown card key", _with(numaNode=0), "cards[0].numaNode", "unknown field"),
    ("card id missing", {"cards": [{"vendor": "v", "model": "m"}]}, "cards[0].id", "required"),
    ("card id empty", {"cards": [card("")]}, "cards[0].id", "must not be empty"),
    ("card id not a string", {"cards": [{**card("a"), "id": 7}]}, "cards[0].id", "expected a string"),
    ("model missing", {"cards": [{"id": "a", "vendor": "v"}]}, "cards[0].model", "required"),
    ("unquoted PCI address", _with(pciAddress=3723.0), "cards[0].pciAddress", "quote it"),
    ("malformed PCI address", _with(pciAddress="17:00.0"), "cards[0].pciAddress", "not a PCI address"),
    ("vendor id too big", _with(pciVendorId=0x10000), "cards[0].pciVendorId", "at most"),
    ("memory as bool", _with(memoryMiB=True), "cards[0].memoryMiB", "expected an integer"),
    ("negative numa", _with(numa=-1), "cards[0].numa", "at least 0"),
    ("attribute not a string", _with(attributes={"x": 1}), "cards[0].attributes.x", "strings"),
    ("duplicate card id", {"cards": [card("a"), card("a")]}, "cards[1].id", "duplicate id"),
    ("duplicate index", {"cards": [card("a", index=1), card("b")]}, "cards[1].index", "duplicate index"),
    (
        "duplicate PCI address",
        {"cards": [card("a", pciAddress="0000:01:00.0"), card("b", pciAddress="0000:01:00.0")]},
        "cards[1].pciAddress",
        "duplicate PCI address",
    ),
    (
        "partition id clashes with a card",
        _with(partitions=[{"id": "b", "profile": "p"}]),
        "cards[1].id",
        "duplicate id",
    ),
    (
        "unknown partition key",
        _with(partitions=[{"id": "p", "profile": "x", "uuid": "u"}]),
        "cards[0].partitions[0].uuid",
        "unknown field",
    ),
    (
        "partition profile not offered",
        _with(partitionProfiles={"1g.10gb": 7}, partitions=[{"id": "p", "profile": "2g.20gb"}]),
        "cards[0].partitions[0].profile",
        "not in the card's partitionProfiles",
    ),
    (
        "more partitions than the profile allows",
        _with(
            partitionProfiles={"7g": 1},
            partitions=[{"id": "p1", "profile": "7g"}, {"id": "p2", "profile": "7g"}],
        ),
        "cards[0].partitions",
        "allows 1",
    ),
    (
        "profile max zero",
        _with(partitionProfiles={"1g": 0}),
        'cards[0].partitionProfiles["1g"]',
        "at least 1",
    ),
    (
        "profile mapping without max",
        _with(partitionProfiles={"1g": {"memoryMiB": 1}}),
        'cards[0].partitionProfiles["1g"].max',
        "required",
    ),
    (
        "unknown profile key",
        _with(partitionProfiles={"1g": {"max": 1, "mem": 1}}),
        'cards[0].partitionProfiles["1g"].mem',
        "unknown field",
    ),
    (
        "link to unknown card",
        {"cards": [card("a")], "links": [{"a": "a", "b": "z", "kind": "NVLink"}]},
        "links[0].b",
        "no card",
    ),
    (
        "link to itself",
        {"cards": [card("a")], "links": [{"a": "a", "b": "a", "kind": "NVLink"}]},
        "links[0]",
        "two different",
    ),
    (
        "unknown link kind",
        {"cards": [card("a"), card("b")], "links": [{"a": "a", "b": "b", "kind": "nvlink"}]},
        "links[0].kind",
        "known: NVLink",
    ),
    (
        "link count zero",
        {"cards": [card("a"), card("b")], "links": [{"a": "a", "b": "b", "kind": "HCCS", "count": 0}]},
        "links[0].count",
        "at least 1",
    ),
    (
        "negative bandwidth",
        {
            "cards": [card("a"), card("b")],
            "links": [{"a": "a", "b": "b", "kind": "HCCS", "bandwidthGbps": -1}],
        },
        "links[0].bandwidthGbps",
        "negative",
    ),
    (
        "same link twice, reversed",
        {
            "cards": [card("a"), card("b")],
            "links": [{"a": "a", "b": "b", "kind": "xGMI"}, {"a": "b", "b": "a", "kind": "xGMI"}],
        },
        "links[1]",
        "listed twice",
    ),
    (
        "event for unknown device",
        {"cards": [card("a")], "events": [{"after": 1, "device": "z", "health": "Unhealthy"}]},
        "events[0].device",
        "no card or partition",
    ),
    (
        "event health misspelt",
        {"cards": [card("a")], "events": [{"after": 1, "device": "a", "health": "unhealthy"}]},
        "events[0].health",
        "known: Healthy, Unhealthy",
    ),
    (
        "event without time",
        {"cards": [card("a")], "events": [{"device": "a", "health": "Healthy"}]},
        "events[0].after",
        "required",
    ),
    (
        "event time negative",
        {"cards": [card("a")], "events": [{"after": -1, "device": "a", "health": "Healthy"}]},
        "events[0].after",
        "negative",
    ),
    (
        "unknown event key",
        {"cards": [card("a")], "events": [{"after": 1, "device": "a", "health": "Healthy", "at": 2}]},
        "events[0].at",
        "unknown field",
    ),
]


@pytest.mark.parametrize(
    ("data", "field_path", "problem"),
    [pytest.param(data, path, problem, id=name) for name, data, path, problem in STRICT_CASES],
)
def test_strict_errors_name_the_field(data: object, field_path: str, problem: str) -> None:
    with pytest.raises(NodeDescriptionError) as caught:
        parse_node_description(data, "test")
    assert caught.value.field == (field_path if field_path != "<document>" else "")
    assert str(caught.value).startswith(f"{field_path}: ")
    assert problem in caught.value.problem


def test_partition_can_be_referenced_by_an_event() -> None:
    node = parse_node_description(
        {
            "cards": [card("a", partitions=[{"id": "MIG-1", "profile": "1g.10gb"}])],
            "events": [{"after": 0, "device": "MIG-1", "health": "Unhealthy"}],
        }
    )
    assert node.events[0].event.device_id == "MIG-1"


# ------------------------------------------------------------------------------------------- files


def test_missing_file_is_backend_absent_with_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(BackendAbsent, match=r"nope\.yaml: cannot read"):
        load_node_description(path)


def test_directory_is_backend_absent(tmp_path: Path) -> None:
    with pytest.raises(BackendAbsent, match="cannot read"):
        load_node_description(tmp_path)


def test_broken_yaml_is_backend_absent(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("cards: [\n  - id: a\n", encoding="utf-8")
    with pytest.raises(BackendAbsent, match=r"broken\.yaml: invalid YAML"):
        load_node_description(path)


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("cards:\n  - id: a\n    vendor: v\n    model: m\n    model: n\n", encoding="utf-8")
    with pytest.raises(BackendAbsent, match="duplicate key 'model'"):
        load_node_description(path)


def test_anchors_and_merge_keys_may_repeat_a_card(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(
        "cards:\n"
        "  - &h100 {id: a, vendor: nvidia, model: H100, memoryMiB: 81559, numa: 0}\n"
        "  - {<<: *h100, id: b, numa: 1}\n",
        encoding="utf-8",
    )
    cards = load_node_description(path).cards
    assert [(c.id, c.memory_mib, c.numa_node) for c in cards] == [("a", 81559, 0), ("b", 81559, 1)]


def test_unhashable_yaml_key_is_backend_absent(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("? [a, b]\n: 1\n", encoding="utf-8")
    with pytest.raises(BackendAbsent, match="invalid YAML"):
        load_node_description(path)


def test_invalid_content_is_backend_absent_with_field_path(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("cards:\n  - {id: a, vendor: v, model: m, colour: red}\n", encoding="utf-8")
    with pytest.raises(BackendAbsent, match=r"node\.yaml: cards\[0\]\.colour: unknown field"):
        load_node_description(path)


def test_file_with_hex_ids_and_quoted_pci(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(
        'cards:\n  - {id: a, vendor: v, model: m, pciAddress: "0000:17:00.0", pciVendorId: 0x10de}\n',
        encoding="utf-8",
    )
    node = load_node_description(path)
    assert node.cards[0].pci_vendor_id == 0x10DE
    assert node.source == str(path)


def test_unknown_builtin_lists_the_known_ones() -> None:
    with pytest.raises(BackendAbsent, match=r"no such built-in node.*two-gpus"):
        load_node_description("builtin:three-gpus")
