"""Kubelet's DRA device health stream (``DRAResourceHealth`` v1 and v1alpha1) over the real sockets:
both services are advertised at registration, the stream carries every device's health as the slice
taints see it, a health change reaches kubelet in either version, and a stopping plugin ends it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hcs_deviceplugin.api.drahealth.v1alpha1 import api_wire as pb
from hcs_deviceplugin.dra.health import HEALTH_SERVICES, HealthFeed, HealthServicer
from hcs_deviceplugin.kubeletsim.drahealth import HEALTH_V1, HEALTH_V1ALPHA1, HealthWatch
from hcs_deviceplugin.model import Health
from hcs_deviceplugin.rpc.calls import CallContext
from tests.dra.rig import DRIVER, NODE, Rig, compute_devices, dra_rig

TIMEOUT = 10.0


@pytest.fixture
def rig() -> Iterator[Rig]:
    with dra_rig() as rig:
        rig.start_plugin()
        rig.kubelet.wait_registered(DRIVER, TIMEOUT)
        yield rig


def test_the_registration_lists_the_health_services_after_the_dra_services(rig: Rig) -> None:
    registration = rig.kubelet.wait_registered(DRIVER, TIMEOUT)
    assert registration.advertised == (
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
    )
    assert HEALTH_SERVICES == (HEALTH_V1, HEALTH_V1ALPHA1)
    assert registration.service == "v1.DRAPlugin"


@pytest.mark.parametrize(
    ("known", "chosen"), [((HEALTH_V1, HEALTH_V1ALPHA1), HEALTH_V1), ((HEALTH_V1ALPHA1,), HEALTH_V1ALPHA1)]
)
def test_a_1_37_kubelet_watches_v1_and_an_older_one_v1alpha1(
    rig: Rig, known: tuple[str, ...], chosen: str
) -> None:
    with HealthWatch(rig.kubelet.wait_registered(DRIVER, TIMEOUT), known) as watch:
        assert watch.service == chosen
        first = watch.wait_for(lambda health: len(health) > 0, TIMEOUT)
        assert first == {(NODE, d.name): "HEALTHY" for d in rig.devices}
        rig.set_health(rig.devices[0].card_id, Health.UNHEALTHY)
        watch.wait_for(lambda health: health[(NODE, rig.devices[0].name)] == "UNHEALTHY", TIMEOUT)


def test_the_stream_opens_with_every_device_healthy_under_the_node_pool(rig: Rig) -> None:
    with HealthWatch(rig.kubelet.wait_registered(DRIVER, TIMEOUT)) as watch:
        first = watch.wait_for(lambda health: len(health) > 0, TIMEOUT)
    assert first == {(NODE, d.name): "HEALTHY" for d in rig.devices}


def test_a_health_change_reaches_kubelet_and_comes_back(rig: Rig) -> None:
    card = rig.devices[0].card_id
    on_card = {(NODE, d.name) for d in rig.devices if d.card_id == card}
    with HealthWatch(rig.kubelet.wait_registered(DRIVER, TIMEOUT)) as watch:
        watch.wait_for(lambda health: len(health) == len(rig.devices), TIMEOUT)
        rig.set_health(card, Health.UNHEALTHY)
        sick = watch.wait_for(lambda health: any(v == "UNHEALTHY" for v in health.values()), TIMEOUT)
        assert {key for key, value in sick.items() if value == "UNHEALTHY"} == on_card
        rig.set_health(card, Health.HEALTHY)
        watch.wait_for(lambda health: set(health.values()) == {"HEALTHY"}, TIMEOUT)


def test_stopping_the_plugin_ends_the_stream(rig: Rig) -> None:
    watch = HealthWatch(rig.kubelet.wait_registered(DRIVER, TIMEOUT))
    try:
        watch.wait_for(lambda health: len(health) > 0, TIMEOUT)
        rig.stop_plugin()
        assert watch.wait_ended(TIMEOUT), "the stream outlived the plugin"
    finally:
        watch.close()


def test_a_stream_beyond_the_limit_ends_the_oldest_and_the_rest_go_on(rig: Rig) -> None:
    """Every stream holds a server thread: a client opening stream after stream ends its oldest
    (in either version) instead of piling threads up, and the newer streams still see changes."""
    registration = rig.kubelet.wait_registered(DRIVER, TIMEOUT)
    watches: list[HealthWatch] = []
    try:
        for n in range(HealthServicer.MAX_STREAMS + 1):
            known = (HEALTH_V1,) if n % 2 == 0 else (HEALTH_V1ALPHA1,)
            watch = HealthWatch(registration, known)
            watches.append(watch)
            watch.wait_for(lambda health: len(health) > 0, TIMEOUT)  # open before the next one
        oldest, *rest = watches
        assert oldest.wait_ended(TIMEOUT), "the oldest stream was not ended"
        assert not any(w.wait_ended(0) for w in rest)
        rig.set_health(rig.devices[0].card_id, Health.UNHEALTHY)
        for watch in rest:
            watch.wait_for(lambda health: health[(NODE, rig.devices[0].name)] == "UNHEALTHY", TIMEOUT)
    finally:
        for watch in watches:
            watch.close()


def test_an_ended_stream_gives_its_place_back() -> None:
    """Counted out as the server closes it, so ended streams never crowd live ones out."""
    servicer = HealthServicer(HealthFeed(NODE))
    streams = [
        servicer.NodeWatchResources(pb.NodeWatchResourcesRequest(), CallContext("w")) for _ in range(3)
    ]
    for stream in streams:
        next(stream)
    assert servicer.open_streams == 3
    for stream in streams:
        stream.close()
    assert servicer.open_streams == 0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_unchanged_device_keeps_the_time_it_last_changed() -> None:
    with dra_rig() as rig:
        clock = Clock()
        feed = HealthFeed(NODE, clock)
        feed.publish(rig.devices)
        version, _ = feed.snapshot()
        clock.now = 2000.0
        feed.publish(rig.devices)  # nothing changed: no new version, no new times
        assert feed.snapshot()[0] == version
        card = rig.devices[0].card_id
        feed.publish(compute_devices(rig.inventory, rig.publisher, {card: Health.UNHEALTHY}))
        _, response = feed.snapshot()
    named = {d.device.device_name: d for d in response.devices if d.device is not None}
    assert len(named) == len(response.devices)
    times = {name: d.last_updated_time for name, d in named.items()}
    status = {name: d.health for name, d in named.items()}
    assert pb.UNHEALTHY in status.values()
    for name, health in status.items():
        assert times[name] == (2000 if health == pb.UNHEALTHY else 1000), name


def test_a_closed_feed_wakes_a_waiting_stream_at_once() -> None:
    feed = HealthFeed(NODE)
    feed.close()
    assert feed.wait_change(0, TIMEOUT) is None
