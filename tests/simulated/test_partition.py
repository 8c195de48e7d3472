"""partition(): deterministic, idempotent, visible to discovery, and refusing what the card cannot do."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.backend import PARTITION_FILL
from hcs_deviceplugin.model import Card, Health, HealthEvent, NotSupportedError
from tests.simulated.conftest import card, make_backend
from vendors.simulated import SimulatedBackend, load_builtin_node

MIB = 1024 * 1024


def two_gpus() -> tuple[SimulatedBackend, Card, Card]:
    backend = SimulatedBackend(load_builtin_node("two-gpus"))
    first, second = backend.discover().cards
    return backend, first, second


def test_creates_deterministic_partitions() -> None:
    backend, gpu, _ = two_gpus()
    made = backend.partition(gpu, "3g.40gb", 2)
    assert [p.id for p in made] == [f"{gpu.id}-3g.40gb-0", f"{gpu.id}-3g.40gb-1"]
    assert all(p.card_id == gpu.id and p.profile == "3g.40gb" and p.health is Health.HEALTHY for p in made)


def test_is_idempotent_and_visible_to_discover() -> None:
    backend, gpu, _ = two_gpus()
    first = backend.partition(gpu, "1g.10gb", 3)
    assert backend.partition(gpu, "1g.10gb", 3) == first
    assert backend.discover().partitions == tuple(first)


def test_grows_and_shrinks_keeping_the_oldest() -> None:
    backend, gpu, _ = two_gpus()
    backend.partition(gpu, "1g.10gb", 2)
    grown = backend.partition(gpu, "1g.10gb", 4)
    assert [p.id.rsplit("-", 1)[1] for p in grown] == ["0", "1", "2", "3"]
    shrunk = backend.partition(gpu, "1g.10gb", 1)
    assert [p.id for p in shrunk] == [grown[0].id]
    assert backend.partition(gpu, "1g.10gb", 0) == []
    assert backend.discover().partitions == ()


def test_profiles_are_independent_and_cards_too() -> None:
    backend, gpu0, gpu1 = two_gpus()
    small = backend.partition(gpu0, "1g.10gb", 2)
    big = backend.partition(gpu0, "3g.40gb", 1)
    other = backend.partition(gpu1, "7g.80gb", 1)
    assert backend.discover().partitions == tuple(small + big + other)


def test_keeps_described_partitions_and_their_memory() -> None:
    backend = SimulatedBackend(load_builtin_node("default"))
    mig_card = backend.discover().cards[3]
    described = [p.id for p in backend.discover().partitions]
    made = backend.partition(mig_card, "1g.10gb", 3)
    assert [p.id for p in made] == [*described, f"{mig_card.id}-1g.10gb-0"]
    assert made[2].memory_bytes == 9984 * MIB


def test_created_partitions_take_health_events() -> None:
    backend, gpu, _ = two_gpus()
    (part,) = backend.partition(gpu, "7g.80gb", 1)
    backend.inject(HealthEvent(part.id, Health.UNHEALTHY))
    assert backend.discover().partitions[0].health is Health.UNHEALTHY
    backend.partition(gpu, "7g.80gb", 0)
    (again,) = backend.partition(gpu, "7g.80gb", 1)
    assert again.id == part.id and again.health is Health.HEALTHY, "a re-created partition starts healthy"


def test_refusals() -> None:
    backend, gpu, _ = two_gpus()
    with pytest.raises(NotSupportedError, match=r"no profile '4g\.20gb'.*offers: 1g\.10gb"):
        backend.partition(gpu, "4g.20gb", 1)
    with pytest.raises(NotSupportedError, match=r"at most 2 of '3g\.40gb'"):
        backend.partition(gpu, "3g.40gb", 3)
    with pytest.raises(ValueError, match="negative"):
        backend.partition(gpu, "3g.40gb", -2)
    plain = make_backend({"cards": [card("a")]})
    with pytest.raises(NotSupportedError, match="no partition profiles"):
        plain.partition(plain.discover().cards[0], "1g.10gb", 1)
    with pytest.raises(NotSupportedError, match="not a card of the simulated backend"):
        plain.partition(gpu, "1g.10gb", 1)
    assert backend.discover().partitions == ()


def test_fill_makes_the_profiles_maximum() -> None:
    backend, gpu, _ = two_gpus()
    assert len(backend.partition(gpu, "3g.40gb", PARTITION_FILL)) == 2
    assert len(backend.partition(gpu, "3g.40gb", PARTITION_FILL)) == 2, "idempotent"


def test_generated_names_skip_ids_already_taken() -> None:
    backend = make_backend(
        {
            "cards": [
                card(
                    "g",
                    partitionProfiles={"1g": 3, "2g": 1},
                    partitions=[{"id": "g-1g-0", "profile": "2g"}],
                )
            ]
        }
    )
    made = backend.partition(backend.discover().cards[0], "1g", 2)
    assert [p.id for p in made] == ["g-1g-1", "g-1g-2"]
