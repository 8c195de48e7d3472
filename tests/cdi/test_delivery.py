"""One Allocate answer per ``deviceDelivery``, and DKP's device list strategies mapped onto it."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.cdi.delivery import annotation_key, deliver
from hcs_deviceplugin.model import ContainerEdits, DeviceDelivery, DeviceNode, Mount
from hcs_deviceplugin.pools.delivery import delivery_from_strategies

BACKEND = ContainerEdits(
    env={"X_VISIBLE_DEVICES": "0,1"},
    devices=(DeviceNode("/dev/x0", "/dev/x0"), DeviceNode("/dev/x1", "/dev/x1")),
    mounts=(Mount("/opt/x", "/opt/x"),),
    annotations={"x.io/units": "a,b"},
    cdi_devices=("vendor.com/x=a",),
)
NAMES = ("hcs.deckhouse.io/x=a", "hcs.deckhouse.io/x=b")


def env_and_annotations(cdi_devices: tuple[str, ...] = ()) -> ContainerEdits:
    return ContainerEdits(env=BACKEND.env, annotations=BACKEND.annotations, cdi_devices=cdi_devices)


@pytest.mark.parametrize(
    ("delivery", "expected"),
    [
        pytest.param(DeviceDelivery.DEVICE_SPECS, BACKEND, id="deviceSpecs-is-the-backend-answer"),
        pytest.param(
            DeviceDelivery.ENV,
            env_and_annotations(BACKEND.cdi_devices),
            id="env-drops-nodes-and-mounts",
        ),
        pytest.param(
            DeviceDelivery.CDI_CRI,
            env_and_annotations(NAMES),
            id="cdi-cri-names-our-spec",
        ),
        pytest.param(
            DeviceDelivery.CDI_ANNOTATIONS,
            ContainerEdits(
                env=BACKEND.env,
                annotations={**BACKEND.annotations, annotation_key("pool-a"): ",".join(NAMES)},
            ),
            id="cdi-annotations-names-our-spec",
        ),
    ],
)
def test_deliver(delivery: DeviceDelivery, expected: ContainerEdits) -> None:
    assert deliver(BACKEND, delivery, NAMES, "pool-a") == expected


def test_the_annotation_is_keyed_by_pool() -> None:
    edits = deliver(BACKEND, DeviceDelivery.CDI_ANNOTATIONS, NAMES, "pool-a")
    assert "cdi.k8s.io/hcs-deviceplugin_pool-a" in edits.annotations


@pytest.mark.parametrize(
    ("strategies", "delivery", "backend_strategy"),
    [
        pytest.param(None, DeviceDelivery.DEVICE_SPECS, None, id="none"),
        pytest.param("envvar", DeviceDelivery.DEVICE_SPECS, "envvar", id="envvar"),
        pytest.param("volume-mounts", DeviceDelivery.DEVICE_SPECS, "volume-mounts", id="volume-mounts"),
        pytest.param("cdi-cri", DeviceDelivery.CDI_CRI, "envvar", id="cdi-cri"),
        pytest.param("cdi-annotations", DeviceDelivery.CDI_ANNOTATIONS, "envvar", id="cdi-annotations"),
        pytest.param("volume-mounts,cdi-annotations", DeviceDelivery.CDI_ANNOTATIONS, "envvar", id="mixed"),
        pytest.param("cdi-annotations,cdi-cri", DeviceDelivery.CDI_CRI, "envvar", id="both-cdi-prefers-cri"),
    ],
)
def test_dkp_strategies_map_onto_delivery(
    strategies: str | None, delivery: DeviceDelivery, backend_strategy: str | None
) -> None:
    options = {"deviceIDStrategy": "uuid"} | ({"deviceListStrategy": strategies} if strategies else {})
    got, backend_options = delivery_from_strategies(options)
    assert got is delivery
    assert backend_options.get("deviceListStrategy") == backend_strategy
    assert backend_options["deviceIDStrategy"] == "uuid"
