"""vNPU layouts through DCMI on the fake: create, keep, fill, rediscover after a restart, destroy, refuse."""

from __future__ import annotations

import json

import pytest

from hcs_deviceplugin.backend import PARTITION_FILL
from hcs_deviceplugin.model import Card, NotSupportedError
from tests.ascend.backend_harness import Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend.fake import node_310p_duo, node_910_a1, node_910b, node_a3

GIB = 2**30


def test_create_two_vnpus_on_a_free_chip(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node)
    chip = backend.discover().cards[1]
    made = backend.partition(chip, "vir05_1c_16g", 2)
    assert [p.attributes["vdevId"] for p in made] == ["116", "117"], "100 + 16 x phy 1 + slot"
    assert [p.id for p in made] == [f"{chip.id}-vnpu-116", f"{chip.id}-vnpu-117"]
    assert {(p.card_id, p.profile, p.memory_bytes) for p in made} == {(chip.id, "vir05_1c_16g", 16 * GIB)}
    assert {p.attributes["resourceSuffix"] for p in made} == {"5c.1cpu.16g"}
    assert {p.attributes["containerUsed"] for p in made} == {"false"}
    assert (node.host_root / "dev/vdavinci116").exists()
    assert [p.id for p in backend.discover().partitions] == [p.id for p in made]


def test_layout_is_idempotent(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    backend = ascend.backend(node)
    chip = backend.discover().cards[0]
    made = backend.partition(chip, "vir10_3c_32g", PARTITION_FILL)
    state = node.files.state.read_text()
    again = backend.partition(chip, "vir10_3c_32g", PARTITION_FILL)
    assert [p.id for p in again] == [p.id for p in made] and len(made) == 2
    assert node.files.state.read_text() == state, "nothing destroyed or created"


@pytest.mark.parametrize(
    ("description", "profile", "count"),
    [
        (node_910b(1), "vir05_1c_16g", 4),  # 20 AI cores / 5, 64 GB / 16
        (node_910_a1(), "vir02", 15),  # 30 AI cores / 2
        (node_910_a1(), "vir16", 1),
        (node_310p_duo(1), "vir01", 8),  # 8 AI cores, 24 GB / 3
        (node_310p_duo(1), "vir04_3c", 2),
    ],
)
def test_fill_makes_as_many_as_fit(
    ascend: Harness, description: dict[str, object], profile: str, count: int
) -> None:
    backend = ascend.backend(ascend.node(description))
    made = backend.partition(backend.discover().cards[0], profile, PARTITION_FILL)
    assert len(made) == count and {p.profile for p in made} == {profile}


def test_vnpus_are_rediscovered_after_a_restart(ascend: Harness) -> None:
    node = ascend.node(node_310p_duo(1))
    first = ascend.backend(node)
    chip = first.discover().cards[1]
    made = first.partition(chip, "vir02_1c", PARTITION_FILL)
    first.close()

    restarted = ascend.backend(node)
    found = restarted.discover().partitions
    assert [(p.id, p.card_id, p.profile) for p in found] == [(p.id, p.card_id, p.profile) for p in made]
    assert [p.id for p in restarted.partition(chip, "vir02_1c", PARTITION_FILL)] == [p.id for p in made]


def test_another_template_replaces_the_free_vnpus(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    backend = ascend.backend(node)
    chip = backend.discover().cards[0]
    small = backend.partition(chip, "vir05_1c_16g", PARTITION_FILL)
    large = backend.partition(chip, "vir10_3c_32g", PARTITION_FILL)
    assert len(small) == 4 and len(large) == 2
    assert {p.profile for p in backend.discover().partitions} == {"vir10_3c_32g"}
    state = json.loads(node.files.state.read_text())
    assert sorted(v["template"] for v in state["vnpus"]) == ["vir10_3c_32g"] * 2
    gone = {p.attributes["vdevId"] for p in small} - {p.attributes["vdevId"] for p in large}
    assert not any((node.host_root / f"dev/vdavinci{v}").exists() for v in gone)


def test_a_vnpu_in_use_is_never_destroyed(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    backend = ascend.backend(node)
    chip = backend.discover().cards[0]
    made = backend.partition(chip, "vir05_1c_16g", 2)
    node.control.set_vnpu_in_use(int(made[1].attributes["vdevId"]))
    with pytest.raises(NotSupportedError, match=r"vNPU\(s\) 101 in use by a container; nothing destroyed"):
        backend.partition(chip, "vir10_3c_32g", 1)
    after = backend.discover().partitions
    assert [p.id for p in after] == [p.id for p in made]
    assert after[1].attributes["containerUsed"] == "true"


def test_fewer_than_existing_destroys_the_rest(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1)))
    chip = backend.discover().cards[0]
    made = backend.partition(chip, "vir05_1c_16g", 4)
    kept = backend.partition(chip, "vir05_1c_16g", 1)
    assert [p.id for p in kept] == [made[0].id]
    assert [p.id for p in backend.discover().partitions] == [made[0].id]


@pytest.mark.parametrize(
    ("description", "profile", "message"),
    [
        (
            node_910b(1),
            "vir02",
            r"Ascend910B chip \S+ has no vNPU template 'vir02'; it offers vir05_1c_16g, vir10_3c_32g$",
        ),
        (
            node_310p_duo(1),
            "vir16",
            r"Ascend310P chip \S+ has no vNPU template 'vir16'; it offers vir01, vir02, vir02_1c, vir04, ",
        ),
        (node_a3(1), "vir06_1c_16g", r"chip \S+ \(Ascend910A3\) has no vNPU templates"),
    ],
)
def test_template_the_family_lacks_is_refused_before_any_change(
    ascend: Harness, description: dict[str, object], profile: str, message: str
) -> None:
    node = ascend.node(description)
    backend = ascend.backend(node)
    chip = backend.discover().cards[0]
    state = node.files.state.read_text()
    with pytest.raises(NotSupportedError, match=message):
        backend.partition(chip, profile, PARTITION_FILL)
    assert node.files.state.read_text() == state


def test_more_than_fit_is_refused(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1)))
    chip = backend.discover().cards[0]
    with pytest.raises(NotSupportedError, match="holds at most 4 × vir05_1c_16g, not 5"):
        backend.partition(chip, "vir05_1c_16g", 5)
    assert backend.discover().partitions == ()


def test_count_must_be_positive(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1)))
    with pytest.raises(ValueError, match="at least 1"):
        backend.partition(backend.discover().cards[0], "vir05_1c_16g", 0)


def test_chip_without_vnpu_support_is_refused(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    node.control.not_supported("dcmi_get_device_info")
    backend = ascend.backend(node)
    with pytest.raises(NotSupportedError, match="no vNPU support"):
        backend.partition(backend.discover().cards[0], "vir05_1c_16g", 1)


def test_library_without_vnpu_creation_says_so(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1), omit=("dcmi_create_vdevice",)))
    with pytest.raises(NotSupportedError, match="missing symbol; vNPU creation unavailable"):
        backend.partition(backend.discover().cards[0], "vir05_1c_16g", 1)


def test_cards_of_other_backends_are_refused(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1)))
    foreign = Card(id="GPU-1", backend="nvidia", vendor="nvidia", model="H100", index=0)
    with pytest.raises(NotSupportedError, match="belongs to backend nvidia"):
        backend.partition(foreign, "vir05_1c_16g", 1)
