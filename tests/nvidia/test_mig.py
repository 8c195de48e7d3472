"""MIG profile names (go-nvlib's rules, nvidia.md §3.11) and filling a card with one profile."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.backend import PARTITION_FILL
from hcs_deviceplugin.model import Card, NotSupportedError
from tests.nvidia.conftest import Harness
from vendors.nvidia.fake.node import H100_MEMORY, gpu, h100_mig, mig_instance, mig_node, pcie_node
from vendors.nvidia.mig import memory_gb, profile_name

A100_80GB = 80 * 2**30
A100_40GB = 40 * 2**30


@pytest.mark.parametrize(
    ("memory_mb", "total", "gb"),
    [
        (9856, A100_80GB, 10),  # the worked example in §3.11
        (4864, A100_40GB, 5),
        (9984, H100_MEMORY, 10),  # what a real H100 answered (§6)
        (20096, H100_MEMORY, 20),
        (40448, H100_MEMORY, 40),
        (81152, H100_MEMORY, 80),
    ],
)
def test_memory_in_profile_names(memory_mb: int, total: int, gb: int) -> None:
    assert memory_gb(memory_mb, total) == gb


@pytest.mark.parametrize(
    ("g", "c", "gb", "suffix", "name"),
    [
        (1, 1, 10, "", "1g.10gb"),
        (3, 1, 40, "", "1c.3g.40gb"),
        (1, 1, 10, "+me", "1g.10gb+me"),
        (7, 7, 80, "", "7g.80gb"),
    ],
)
def test_profile_name(g: int, c: int, gb: int, suffix: str, name: str) -> None:
    assert profile_name(g, c, gb, suffix) == name


def test_compute_instance_slices_and_media_engine_variants_are_named(nvidia: Harness) -> None:
    sliced = {**mig_instance("3g.40gb", 0), "compute": [{"profile_index": 0}] * 3}
    layout = [sliced, mig_instance("1g.10gb+me", 4), mig_instance("1g.20gb", 6)]
    node = {"gpus": [gpu("named", 0, bus=0x18, mig=h100_mig(1, layout))], "control_file": "control.jsonl"}
    inventory = nvidia.backend(nvidia.node(node)).discover()
    assert [p.profile for p in inventory.partitions] == ["1c.3g.40gb"] * 3 + ["1g.10gb+me", "1g.20gb"]


def test_fill_a_mixed_card_with_one_profile(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    mixed = backend.discover().cards[0]
    made = backend.partition(mixed, "1g.10gb", 7)
    assert [p.profile for p in made] == ["1g.10gb"] * 7
    assert {p.card_id for p in made} == {mixed.id}
    on_card = [p for p in backend.discover().partitions if p.card_id == mixed.id]
    assert sorted(p.id for p in on_card) == sorted(p.id for p in made)
    assert sorted(int(p.attributes["placementStart"]) for p in made) == list(range(7))

    again = backend.partition(mixed, "1g.10gb", 7)  # idempotent: nothing destroyed or recreated
    assert [p.id for p in again] == [p.id for p in made]


def test_existing_instances_of_the_profile_are_kept(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    inventory = backend.discover()
    mixed = inventory.cards[0]
    existing = next(p for p in inventory.partitions if p.card_id == mixed.id and p.profile == "3g.40gb")
    made = backend.partition(mixed, "3g.40gb", 2)
    assert len(made) == 2
    assert existing.id in {p.id for p in made}
    assert {p.profile for p in backend.discover().partitions if p.card_id == mixed.id} == {"3g.40gb"}


def test_fewer_than_existing_destroys_the_rest(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    single = backend.discover().cards[1]
    made = backend.partition(single, "1g.10gb", 3)
    assert len(made) == 3
    assert len([p for p in backend.discover().partitions if p.card_id == single.id]) == 3
    assert len(backend.partition(single, "7g.80gb", 1)) == 1


def test_mig_disabled_card_is_not_partitionable(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    disabled = backend.discover().cards[2]
    with pytest.raises(NotSupportedError, match="not partitionable: MIG mode disabled"):
        backend.partition(disabled, "1g.10gb", 1)


def test_card_without_mig_is_not_partitionable(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(pcie_node(1)))
    card = backend.discover().cards[0]
    # The PCIe node describes no MIG at all: GetMigMode answers NOT_SUPPORTED.
    with pytest.raises(NotSupportedError, match="not partitionable: no MIG support"):
        backend.partition(card, "1g.10gb", 1)


@pytest.mark.parametrize(
    ("profile", "count", "message"),
    [
        ("1g.5gb", 1, "has no MIG profile '1g.5gb'; it offers 1g.10gb, 1g.10gb\\+me, 1g.20gb"),
        ("3g.40gb", 3, "holds at most 2"),
    ],
)
def test_impossible_layouts_change_nothing(nvidia: Harness, profile: str, count: int, message: str) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    before = backend.discover()
    with pytest.raises(NotSupportedError, match=message):
        backend.partition(before.cards[0], profile, count)
    assert [p.id for p in backend.discover().partitions] == [p.id for p in before.partitions]


def test_count_must_be_positive(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    with pytest.raises(ValueError, match="at least 1"):
        backend.partition(backend.discover().cards[0], "1g.10gb", 0)


def test_fill_makes_as_many_as_the_card_holds(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    mig_card = next(c for c in backend.discover().cards if c.attributes.get("migMode") == "enabled")
    made = backend.partition(mig_card, "1g.10gb", PARTITION_FILL)
    assert len(made) == 7 and {p.profile for p in made} == {"1g.10gb"}


def test_cards_of_other_backends_are_refused(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))
    foreign = Card(id="npu-0", backend="ascend", vendor="huawei", model="910B", index=0)
    with pytest.raises(NotSupportedError, match="belongs to backend ascend"):
        backend.partition(foreign, "1g.10gb", 1)
