"""claims_by_card looks selectors up in an index of the cards; it must agree with the scan that
:func:`selector_matches` defines, for every kind of selector, node and duplicate identity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.model import Card, DeviceSelector, Pool, PoolSet, inventory_id, selector_matches
from hcs_deviceplugin.reconciler import claims_by_card

NODE = "k8s-w1"


def scan(poolset: PoolSet, cards: tuple[Card, ...], node: str) -> dict[str, list[str]]:
    """The definition: every pool × card × selector."""
    claims: dict[str, list[str]] = {}
    for pool in poolset.pools:
        for card in cards:
            if any(selector_matches(sel, card, node) for sel in pool.devices):
                claims.setdefault(card.id, []).append(pool.name)
    return claims


ids = st.sampled_from(["GPU-1", "GPU-12", "GPU-2", "gpu-1"])
pcis = st.sampled_from(["0000:af:00.0", "0000:AF:00.0", "0000:18:00.0"])
cards = st.lists(
    st.builds(
        Card,
        id=ids,
        backend=st.just("simulated"),
        vendor=st.just("v"),
        model=st.just("m"),
        index=st.integers(0, 2),
        pci_address=pcis,
        pci_vendor_id=st.just(0x10DE),
        pci_device_id=st.just(0x2330),
    ),
    max_size=5,
).map(tuple)
inventory_ids = st.sampled_from(
    [inventory_id(NODE, Card("x", "b", "v", "m", n, "", 0x10DE, 0x2330)) for n in range(3)]
)
selectors = st.builds(
    DeviceSelector,
    uuid=st.none() | ids,
    inventory_id=st.none() | inventory_ids,
    pci_address=st.none() | pcis,
    node=st.none() | st.sampled_from([NODE, "other"]),
    pattern=st.none() | st.sampled_from(["GPU-1", "GPU-*", "*2", "x", "1\nGPU", "2\n", ""]),
)
poolsets = st.lists(st.lists(selectors, max_size=3), max_size=4).map(
    lambda lists: PoolSet(
        tuple(
            Pool(name=f"p{n}", resource_name=f"r/p{n}", devices=tuple(sels)) for n, sels in enumerate(lists)
        )
    )
)


@settings(max_examples=300, deadline=None)
@given(poolsets, cards)
def test_claims_by_card_agrees_with_the_scan(poolset: PoolSet, node_cards: tuple[Card, ...]) -> None:
    assert claims_by_card(poolset, node_cards, NODE) == scan(poolset, node_cards, NODE)
    assert list(claims_by_card(poolset, node_cards, NODE)) == list(scan(poolset, node_cards, NODE))
