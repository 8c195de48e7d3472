"""create_backend through the real entry point, and how it chooses the node description."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import (
    BackendAbsent,
    BackendConfig,
    BackendOptionError,
    available_backend_names,
    load_backends,
    load_factory,
)
from hcs_deviceplugin.model import HealthEvent
from vendors.simulated import NODE_ENV, SimulatedBackend

TWO_CARDS = (
    "cards:\n  - {id: a, vendor: ascend, model: Ascend 910B3}\n  - {id: b, vendor: hygon, model: K100_AI}\n"
)


@pytest.fixture(autouse=True)
def no_env_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NODE_ENV, raising=False)


def create(**options: str) -> SimulatedBackend:
    backend = load_factory("simulated")(BackendConfig(options=options))
    assert isinstance(backend, SimulatedBackend)
    return backend


def test_entry_point_is_installed() -> None:
    assert "simulated" in available_backend_names()


def test_default_node_when_nothing_is_chosen() -> None:
    backend = create()
    assert backend.description.source == "builtin:default"
    assert len(backend.discover().cards) == 10


def test_node_option_names_a_file(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(TWO_CARDS, encoding="utf-8")
    inventory = create(node=str(path)).discover()
    assert [(c.id, c.vendor, c.backend) for c in inventory.cards] == [
        ("a", "ascend", "simulated"),
        ("b", "hygon", "simulated"),
    ]


def test_env_names_a_file_and_option_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(TWO_CARDS, encoding="utf-8")
    monkeypatch.setenv(NODE_ENV, str(path))
    assert create().description.source == str(path)
    assert create(node="builtin:two-gpus").description.source == "builtin:two-gpus"


def test_missing_node_file_is_absent(tmp_path: Path) -> None:
    with pytest.raises(BackendAbsent, match=r"missing\.yaml"):
        create(node=str(tmp_path / "missing.yaml"))


def test_unknown_option_is_refused() -> None:
    with pytest.raises(BackendOptionError, match=r"unknown option.*nod"):
        create(nod="x")


def test_load_backends_lets_an_option_error_through() -> None:
    """A misspelt option stops the start instead of leaving the backend quietly absent."""
    with pytest.raises(BackendOptionError, match=r"unknown option\(s\) nod"):
        load_backends(["simulated"], lambda _: BackendConfig(options={"nod": "x"}))


def test_load_backends_reports_a_broken_node_as_absent(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("cards: [{id: a, vendor: v}]\n", encoding="utf-8")
    loaded = load_backends(["simulated"], lambda _: BackendConfig(options={"node": str(path)}))
    assert loaded.running == {}
    assert "cards[0].model: required field is missing" in loaded.absent["simulated"]


def test_stream_follows_the_config_stop_event() -> None:
    stop = threading.Event()
    backend = load_factory("simulated")(BackendConfig(options={"node": "builtin:two-gpus"}, stop=stop))
    assert isinstance(backend, SimulatedBackend)
    stream = backend.health_events()
    card_id = backend.discover().cards[0].id
    backend.inject(HealthEvent(card_id, backend.discover().cards[0].health))
    assert next(stream).device_id == card_id
    stop.set()
    assert list(stream) == []
