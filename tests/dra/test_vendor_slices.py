"""Each vendor's real backend on its fake hardware, its cards (and partitions) in a DRA pool: every
device of the slice carries the vendor-neutral attributes, partitions their profile and parent, the
allocator's link keys where the backend reports them, and the slice passes the 1.37 checks."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.cdi.names import kinds_of
from hcs_deviceplugin.dra.devices import DraDevice, slice_devices
from hcs_deviceplugin.dra.resourceslice import build_slices
from hcs_deviceplugin.model import DeviceSelector, Pool, PoolApi, PoolSet, UnitKind
from hcs_deviceplugin.reconciler import desired_state, dra_pools
from tests.cdi.test_publisher import CLASSES, Fakes, fakes  # noqa: F401  (the module fixture)
from tests.dra.sliceschema import problems

REQUIRED = {
    "vendor",
    "model",
    "uuid",
    "index",
    "backend",
    "pciAddress",
    "pool",
    "resource.kubernetes.io/pciBusID",
}


@pytest.mark.parametrize("vendor", sorted(CLASSES))
def test_each_vendor_s_fake_cards_publish_every_attribute(fakes: Fakes, vendor: str) -> None:  # noqa: F811
    inventory = fakes.inventories[vendor]
    selectors = tuple(DeviceSelector(uuid=c.id) for c in inventory.cards)
    pools = [Pool(name="cards", resource_name="gpu.deckhouse.io/cards", devices=selectors, api=PoolApi.DRA)]
    profiles = sorted({p.profile for p in inventory.partitions})
    if profiles:
        pools.append(
            Pool(
                name="parts",
                resource_name="gpu.deckhouse.io/parts",
                unit=UnitKind.PARTITION,
                profile=profiles[0],
                devices=selectors,
                api=PoolApi.DRA,
            )
        )
    # The cards pool and the partitions pool claim the same cards: give each its own poolset.
    devices: list[DraDevice] = []
    for pool in pools:
        desired = desired_state(PoolSet((pool,)), inventory, "node-1")
        devices += slice_devices(
            dra_pools(desired.pools), inventory, {}, kinds_of({vendor: fakes.backends[vendor]})
        )
    assert devices, f"{vendor}: no device published"
    (slice_,) = build_slices("gpu.deckhouse.io", "node-1", sorted(devices, key=lambda d: d.name), 1)
    assert problems(slice_) == []
    entries = {d["name"]: d for d in slice_["spec"]["devices"]}
    for device in devices:
        attributes = entries[device.name]["attributes"]
        assert set(attributes) >= REQUIRED, (vendor, device.name, sorted(attributes))
        assert attributes["vendor"]["string"] == device.attributes["vendor"]
        card = next(c for c in inventory.cards if c.id == device.card_id)
        if card.numa_node is not None:
            assert attributes["numaNode"] == {"int": card.numa_node}
        for key in ("linkGroup", "linkModule"):
            if card.attributes.get(key):
                assert attributes[key] == {"string": card.attributes[key]}
        if card.memory_bytes and device.unit_id == card.id:
            assert entries[device.name]["capacity"]["memory"]["value"] == str(card.memory_bytes)
        if device.unit_id != card.id:
            assert attributes["parent"] == {"string": card.id} and "profile" in attributes
