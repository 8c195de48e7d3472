"""Restart state: the file round-trips, is replaced atomically, and yields the safe-side holds."""

from __future__ import annotations

import json
from pathlib import Path

from hcs_deviceplugin.holds import ProvisionalHold
from hcs_deviceplugin.reconciler import HeldCard
from hcs_deviceplugin.restartstate import (
    RestartState,
    RestartStateStore,
    decode,
    encode,
    restart_holds,
)

R1, R2 = "gpu.deckhouse.io/a", "gpu.deckhouse.io/b"


def test_encode_decode_round_trip_moves_hold_times_between_clocks() -> None:
    state = RestartState(
        {"GPU-A": HeldCard(R1, frozenset({"GPU-A::0", "GPU-A::1"}))},
        (ProvisionalHold(R2, frozenset({"GPU-B"}), since=100.0, expires=130.0),),
    )
    text = encode(state, wall_now=5000.0, mono_now=100.0)
    assert json.loads(text)["holds"][0]["expires"] == 5030.0
    back = decode(text, wall_now=5010.0, mono_now=7.0)  # a new process, ten seconds later
    assert back.cards == state.cards
    assert back.holds == (ProvisionalHold(R2, frozenset({"GPU-B"}), since=-3.0, expires=27.0),)


def test_store_writes_atomically_and_a_new_store_reads_it(tmp_path: Path) -> None:
    store = RestartStateStore(tmp_path)
    store.save_cards({"GPU-A": HeldCard(R1, frozenset({"GPU-A"}))})
    store.save_holds([ProvisionalHold(R2, frozenset({"GPU-B"}), 0.0, 1e12)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temp file left
    loaded = RestartStateStore(tmp_path).load()
    assert loaded.cards == {"GPU-A": HeldCard(R1, frozenset({"GPU-A"}))}
    assert [h.unit_ids for h in loaded.holds] == [frozenset({"GPU-B"})]


def test_unreadable_state_is_an_empty_memory(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    for store in (
        RestartStateStore(tmp_path),
        RestartStateStore(tmp_path / "missing"),
        RestartStateStore(None),
    ):
        loaded = store.load()
        assert (dict(loaded.cards), loaded.holds) == ({}, ())


def test_until_confirmed_a_card_stays_where_it_was_and_unknown_cards_go_nowhere() -> None:
    records = {"A": HeldCard(R1, frozenset({"A"})), "B": HeldCard(R1, frozenset({"B::0"}))}
    provisional = {"B": HeldCard(R1, frozenset({"B::1"})), "C": HeldCard(R2, frozenset({"C"}))}
    held, blocked = restart_holds(records, ["A", "B", "C", "D"], provisional)
    assert held == {
        "A": HeldCard(R1, frozenset({"A"})),
        "B": HeldCard(R1, frozenset({"B::0", "B::1"})),
        "C": HeldCard(R2, frozenset({"C"})),
    }
    assert blocked == {"D"}


def test_a_provisional_hold_under_another_resource_than_the_record_blocks_the_card() -> None:
    held, blocked = restart_holds(
        {"A": HeldCard(R1, frozenset({"A"}))}, ["A"], {"A": HeldCard(R2, frozenset({"A"}))}
    )
    assert held == {} and blocked == {"A"}
