"""``api: devicePlugin | dra``: parsed strictly, and one card is served by exactly one front end."""

from __future__ import annotations

import textwrap

import pytest

from hcs_deviceplugin.model import Card, DeviceSelector, Inventory, Pool, PoolApi, PoolSet
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.native import parse_native
from hcs_deviceplugin.reconciler import HeldCard, desired_state, device_plugin_pools, dra_pools


def doc(pool_lines: str) -> str:
    body = textwrap.indent(textwrap.dedent(pool_lines).strip("\n"), "    ")
    return f"version: v1\npools:\n  - name: p\n{body}\n    devices:\n      - uuid: GPU-0\n"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param("", PoolApi.DEVICE_PLUGIN, id="default"),
        pytest.param("api: devicePlugin", PoolApi.DEVICE_PLUGIN, id="device-plugin"),
        pytest.param("api: dra", PoolApi.DRA, id="dra"),
        pytest.param("api: null", PoolApi.DEVICE_PLUGIN, id="null-is-absent"),
    ],
)
def test_api_is_read(lines: str, expected: PoolApi) -> None:
    (pool,) = parse_native(doc(lines), "pools.yaml")
    assert pool.api is expected


@pytest.mark.parametrize(
    ("lines", "field", "fragment"),
    [
        pytest.param("api: DRA", "api", "must be one of devicePlugin, dra", id="case-sensitive"),
        pytest.param("api: 1", "api", "must be one of", id="not-a-string"),
        pytest.param("api: dra\nslicesPerUnit: 2", "slicesPerUnit", "not for api: dra", id="dra-replicas"),
        pytest.param(
            "api: dra\ndeviceDelivery: env", "deviceDelivery", "not for api: dra", id="dra-delivery"
        ),
        pytest.param(
            "api: dra\nslicesPerUnit: 2\nsharing: mps", "sharing", "not for api: dra", id="dra-sharing"
        ),
    ],
)
def test_bad_api_is_an_error_at_its_path(lines: str, field: str, fragment: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native(doc(lines), "pools.yaml")
    matching = [e for e in caught.value.errors if e.path.endswith(field) and fragment in e.message]
    assert matching, [str(e) for e in caught.value.errors]


CARDS = tuple(Card(id=f"GPU-{i}", backend="simulated", vendor="v", model="m", index=i) for i in range(2))
INVENTORY = Inventory(cards=CARDS)


def pool(name: str, *cards: str, api: PoolApi = PoolApi.DEVICE_PLUGIN) -> Pool:
    selectors = tuple(DeviceSelector(uuid=c) for c in cards)
    return Pool(name=name, resource_name=f"gpu.deckhouse.io/{name}", devices=selectors, api=api)


def test_dra_pools_and_device_plugin_pools_split_the_desired_pools() -> None:
    desired = desired_state(
        PoolSet((pool("dp", "GPU-0"), pool("claims", "GPU-1", api=PoolApi.DRA))), INVENTORY, "n"
    )
    assert list(device_plugin_pools(desired.pools)) == ["dp"]
    assert list(dra_pools(desired.pools)) == ["claims"]
    assert dict(desired.assignment) == {"GPU-0": "dp", "GPU-1": "claims"}


def test_holder_keys_of_the_two_front_ends_never_match() -> None:
    dp, dra = pool("x"), pool("x", api=PoolApi.DRA)
    assert dp.holder_key() == "gpu.deckhouse.io/x"
    assert dra.holder_key() == "dra:gpu.deckhouse.io/x"
    assert dp.serving_key() != dra.serving_key()


@pytest.mark.parametrize(
    ("held_under", "target_api", "drains"),
    [
        pytest.param("gpu.deckhouse.io/x", PoolApi.DRA, True, id="pod-held-card-moves-to-dra"),
        pytest.param("dra:gpu.deckhouse.io/x", PoolApi.DEVICE_PLUGIN, True, id="claim-held-card-moves-to-dp"),
        pytest.param("dra:gpu.deckhouse.io/x", PoolApi.DRA, False, id="claim-held-card-stays-in-dra"),
        pytest.param("gpu.deckhouse.io/x", PoolApi.DEVICE_PLUGIN, False, id="pod-held-card-stays-in-dp"),
    ],
)
def test_a_held_card_changing_front_end_drains_first(
    held_under: str, target_api: PoolApi, drains: bool
) -> None:
    held = {"GPU-0": HeldCard(held_under, frozenset({"GPU-0"}))}
    desired = desired_state(PoolSet((pool("x", "GPU-0", api=target_api),)), INVENTORY, "n", held=held)
    assert ("GPU-0" in desired.draining) is drains
    assert ("GPU-0" in desired.assignment) is not drains
