"""The applier's last check before advertising (a card allocated while it moved stays back), and an
apply cut short by a stopping daemon."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from hcs_deviceplugin.daemon.applier import ApplyJob, ServerApplier, newly_held_elsewhere, without_cards
from hcs_deviceplugin.holds import HoldBook
from hcs_deviceplugin.model import ContainerEdits, Inventory, Pool, Unit
from hcs_deviceplugin.plugin.server import PluginServer
from hcs_deviceplugin.reconciler import Desired, DesiredPool, HeldCard
from hcs_deviceplugin.restartstate import RestartStateStore

WAIT = 10.0

B = "gpu.deckhouse.io/b"


def pool(name: str, *cards: str, slices: int = 1) -> DesiredPool:
    units = tuple(
        Unit(id=f"{c}::{n}" if slices > 1 else c, card_id=c, backend="sim")
        for c in cards
        for n in range(slices)
    )
    return DesiredPool(Pool(name, f"gpu.deckhouse.io/{name}", slices_per_unit=slices), cards, units)


@pytest.mark.parametrize(
    ("holder", "excluded"),
    [
        (None, set()),
        (HeldCard("gpu.deckhouse.io/a", frozenset({"X"})), {"X"}),  # held under the pool it left
        (HeldCard(B, frozenset({"X"})), set()),  # held under the pool it joins, same id
        (HeldCard(B, frozenset({"X::3"})), {"X"}),  # same resource, a unit the pool does not offer
    ],
)
def test_cards_held_elsewhere_are_kept_back(holder: HeldCard | None, excluded: set[str]) -> None:
    fresh = {"X": holder} if holder is not None else {}
    assert newly_held_elsewhere({"b": pool("b", "X", "Y")}, fresh) == excluded


def test_without_cards_drops_the_cards_and_their_units_only() -> None:
    want = pool("b", "X", "Y", slices=2)
    kept = without_cards(want, frozenset({"X"}))
    assert kept.cards == ("Y",)
    assert [u.id for u in kept.units] == ["Y::0", "Y::1"]
    assert without_cards(want, frozenset({"Z"})) is want


def test_a_daemon_stopping_in_the_middle_of_an_apply_ends_it_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Shutdown takes every server while an apply is under way (between its CDI hook and its
    advertising): the apply stops, raises nothing and starts no server after the shutdown."""
    made: list[PluginServer] = []

    def make_server(want: DesiredPool, _topology: object) -> PluginServer:
        server = PluginServer(want.pool, want.units, tmp_path, lambda _p, _u: ContainerEdits())
        made.append(server)
        server.start()
        return server

    inside, go_on = threading.Event(), threading.Event()

    def before_apply(job: ApplyJob) -> None:
        if "c" in job.desired.pools:  # the second job: hold it where the shutdown happens
            inside.set()
            go_on.wait(WAIT)

    applied = threading.Event()
    applier = ServerApplier(
        make_server,
        HoldBook(2.0),
        RestartStateStore(None),
        delivery_wait=1.0,
        on_change=applied.set,
        on_skipped=lambda _reason: None,
        before_apply=before_apply,
    )
    applier.start()
    try:
        first = {"a": pool("a", "X", "Y"), "b": pool("b", "Z")}
        applier.submit(ApplyJob(Desired(pools=first), Inventory(), {}))
        assert applied.wait(WAIT) and applier.wait_idle(WAIT) and len(made) == 2
        # Pool a shrinks, b grows, c is new: every phase would touch the servers shutdown takes.
        second = {"a": pool("a", "X"), "b": pool("b", "Z", "Y"), "c": pool("c", "W")}
        with caplog.at_level(logging.ERROR, logger="hcs_deviceplugin.daemon"):
            applier.submit(ApplyJob(Desired(pools=second), Inventory(), {}))
            assert inside.wait(WAIT)
            taken = applier.shutdown()
            go_on.set()
            applier.thread.join(WAIT)
        assert not applier.thread.is_alive()
        # The servers' own "kubelet.sock does not exist" warnings may or may not come first;
        # what must not come is an error (the KeyError this guards against was logged as one).
        assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], caplog.text
        assert len(made) == 2 and sorted(s.state.snapshot.pool.name for s in taken) == ["a", "b"]
    finally:
        go_on.set()
        for server in made:
            server.stop()
