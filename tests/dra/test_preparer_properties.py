"""Property: whatever sequence of Prepare, Unprepare and daemon restarts kubelet drives, the holds
are exactly the devices of the claims a model says are prepared, no device is prepared for two
claims, and a repeated Prepare answers what the first did."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.dra.checkpoint import ClaimCheckpoint
from hcs_deviceplugin.dra.devices import DraDevice
from hcs_deviceplugin.dra.preparer import ClaimPreparer, ClaimRef
from hcs_deviceplugin.model import Health
from hcs_deviceplugin.simulation.dra import MemoryClaims

DRIVER, NODE = "gpu.deckhouse.io", "node-1"
DEVICES = tuple(
    DraDevice(
        f"dev-{i}",
        "p",
        f"card-{i}",
        f"card-{i}",
        "b",
        "dra:gpu.deckhouse.io/p",
        Health.HEALTHY,
        f"k/c=card-{i}",
    )
    for i in range(3)
)
# Claim i asks for these devices (two claims share dev-1, so they exclude each other).
WANTS = (("dev-0",), ("dev-1",), ("dev-1", "dev-2"), ("dev-2",))

operation = st.one_of(
    st.tuples(st.just("prepare"), st.integers(0, len(WANTS) - 1)),
    st.tuples(st.just("unprepare"), st.integers(0, len(WANTS) - 1)),
    st.tuples(st.just("restart"), st.just(0)),
)


def preparer(claims: MemoryClaims, directory: Path) -> ClaimPreparer:
    made = ClaimPreparer(DRIVER, NODE, claims, ClaimCheckpoint(directory), lambda _devices: "")
    made.set_devices(DEVICES)
    return made


@settings(max_examples=60, deadline=None)
@given(st.lists(operation, max_size=25))
def test_holds_follow_the_prepared_claims_across_restarts(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory(prefix="dra-prop") as name:
        claims = MemoryClaims()
        refs = [
            ClaimRef(*claims.allocate("ns", f"c{i}", DRIVER, NODE, wants)) for i, wants in enumerate(WANTS)
        ]
        subject = preparer(claims, Path(name))
        prepared: dict[int, tuple[str, ...]] = {}
        first_answers: dict[int, object] = {}
        for op, i in ops:
            if op == "restart":
                subject = preparer(claims, Path(name))
            elif op == "unprepare":
                assert subject.unprepare(refs[i]) == ""
                prepared.pop(i, None)
                first_answers.pop(i, None)
            else:
                result = subject.prepare(refs[i])
                taken = {d for j, ds in prepared.items() if j != i for d in ds}
                if i in prepared:
                    assert result == first_answers[i], "a repeated Prepare answers what the first did"
                elif taken & set(WANTS[i]):
                    assert "already prepared for claim" in result.error
                else:
                    assert result.error == ""
                    prepared[i] = WANTS[i]
                    first_answers[i] = result
            held = {unit for units in subject.holds().values() for unit in units}
            assert held == {f"card-{d.split('-')[1]}" for ds in prepared.values() for d in ds}
            names = [d.device for c in subject.prepared().values() for d in c.devices]
            assert len(names) == len(set(names)), "no device prepared for two claims"
