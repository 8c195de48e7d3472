"""The DRA plugin over real sockets: registration, Prepare → CDI names that resolve, idempotence,
restart between Prepare and Unprepare, and every refusal a claim can meet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hcs_deviceplugin.dra.devices import DraDevice
from hcs_deviceplugin.model import Health
from tests.cdi.runtime import CdiRegistry
from tests.dra.rig import DRIVER, Rig, claim_object, dra_rig
from tests.pools.fakeapiserver import RecordedRequest

TIMEOUT = 10.0


@pytest.fixture
def rig() -> Iterator[Rig]:
    with dra_rig() as rig:
        rig.start_plugin()
        rig.kubelet.wait_registered(DRIVER, TIMEOUT)
        yield rig


def claim_reads(rig: Rig, name: str) -> list[RecordedRequest]:
    return rig.api.requests(lambda r: r.method == "GET" and r.path.endswith(f"/resourceclaims/{name}"))


def nvidia(rig: Rig) -> list[DraDevice]:
    return [d for d in rig.devices if d.attributes["vendor"] == "nvidia" and "parent" not in d.attributes]


def test_the_simulated_kubelet_accepts_the_registration(rig: Rig) -> None:
    registration = rig.kubelet.wait_registered(DRIVER, TIMEOUT)
    assert registration.service == "v1.DRAPlugin"
    assert registration.endpoint == str(rig.root / "plugins" / DRIVER / "dra.sock")
    assert registration.socket == str(rig.root / "plugins_registry" / f"{DRIVER}-reg.sock")
    assert rig.server is not None and rig.server.wait_registered(TIMEOUT)


def test_a_prepared_claim_names_cdi_devices_that_resolve_in_the_written_spec(rig: Rig) -> None:
    first, second = nvidia(rig)[:2]
    ref = rig.put_claim("train", [first.name, second.name])
    answer = rig.kubelet.prepare(DRIVER, [ref]).claims[ref[1]]
    assert answer.error == ""
    assert [(d.device_name, d.pool_name, list(d.request_names)) for d in answer.devices] == [
        (first.name, "node-a", ["gpu"]),
        (second.name, "node-a", ["gpu"]),
    ]
    ids = [i for d in answer.devices for i in d.cdi_device_ids]
    state = CdiRegistry.load(rig.cdi_dir).resolve(ids)  # raises when a name is not in the spec
    assert state.device_nodes, "the spec entries carry the cards' device nodes"
    assert rig.preparer is not None
    assert rig.preparer.holds() == {"dra:gpu.deckhouse.io/team-a": frozenset({first.unit_id, second.unit_id})}


def test_prepare_and_unprepare_are_idempotent(rig: Rig) -> None:
    device = nvidia(rig)[0]
    ref = rig.put_claim("once", [device.name])
    one = rig.kubelet.prepare(DRIVER, [ref])
    two = rig.kubelet.prepare(DRIVER, [ref])
    assert one == two
    assert len(claim_reads(rig, "once")) == 1, "a prepared claim answers from its record"
    assert rig.kubelet.unprepare(DRIVER, [ref]).claims[ref[1]].error == ""
    assert rig.kubelet.unprepare(DRIVER, [ref]).claims[ref[1]].error == ""
    assert rig.preparer is not None and rig.preparer.holds() == {}


def test_a_restart_between_prepare_and_unprepare_neither_leaks_nor_prepares_twice(rig: Rig) -> None:
    device = nvidia(rig)[0]
    ref = rig.put_claim("survivor", [device.name])
    before = rig.kubelet.prepare(DRIVER, [ref])
    rig.stop_plugin()
    rig.start_plugin()
    rig.kubelet.wait_registered(DRIVER, TIMEOUT)
    assert rig.preparer is not None
    assert rig.preparer.holds() == {"dra:gpu.deckhouse.io/team-a": frozenset({device.unit_id})}, "held again"
    assert rig.kubelet.prepare(DRIVER, [ref]) == before
    assert len(claim_reads(rig, "survivor")) == 1, "the restored record answered, no second preparation"
    other = rig.put_claim("thief", [device.name])
    assert "already prepared for claim" in rig.kubelet.prepare(DRIVER, [other]).claims[other[1]].error
    rig.kubelet.unprepare(DRIVER, [ref])
    rig.stop_plugin()
    rig.start_plugin()
    assert rig.preparer.holds() == {}, "the release survived the restart too"


def test_v1beta1_kubelets_get_the_same_answer(rig: Rig) -> None:
    device = nvidia(rig)[0]
    ref = rig.put_claim("old-kubelet", [device.name])
    answer = rig.kubelet.prepare(DRIVER, [ref], service="v1beta1.DRAPlugin").claims[ref[1]]
    assert answer.error == "" and [d.device_name for d in answer.devices] == [device.name]


@pytest.mark.parametrize(
    "case",
    ["unhealthy", "unknown-device", "other-pool", "other-uid", "not-allocated", "missing", "other-driver"],
)
def test_a_claim_that_cannot_be_prepared_gets_an_error_and_holds_nothing(rig: Rig, case: str) -> None:
    device = nvidia(rig)[0]
    ref = rig.put_claim("bad", [device.name])
    if case == "unhealthy":
        rig.set_health(device.card_id, Health.UNHEALTHY)
        expected = "is unhealthy"
    elif case == "unknown-device":
        ref = rig.put_claim("bad", ["no-such-device"])
        expected = "not in a DRA pool of this node"
    elif case == "other-pool":
        obj = claim_object("default", "bad", [device.name])
        obj["status"]["allocation"]["devices"]["results"][0]["pool"] = "node-b"
        ref = ("default", rig.api.put_resource_claim(obj)["metadata"]["uid"], "bad")
        expected = "not this node's pool"
    elif case == "other-uid":
        ref = (ref[0], "a-uid-from-before", ref[2])
        expected = "kubelet asked for"
    elif case == "not-allocated":
        obj = claim_object("default", "bad", [device.name])
        del obj["status"]
        ref = ("default", rig.api.put_resource_claim(obj)["metadata"]["uid"], "bad")
        expected = "is not allocated"
    elif case == "missing":
        ref = ("default", "uid-x", "never-created")
        expected = "not found"
    else:
        obj = claim_object("default", "bad", [device.name])
        obj["status"]["allocation"]["devices"]["results"][0]["driver"] = "other.example.com"
        ref = ("default", rig.api.put_resource_claim(obj)["metadata"]["uid"], "bad")
        expected = "has no device of driver"
    answer = rig.kubelet.prepare(DRIVER, [ref]).claims[ref[1]]
    assert expected in answer.error
    assert not answer.devices
    assert rig.preparer is not None and rig.preparer.holds() == {}
