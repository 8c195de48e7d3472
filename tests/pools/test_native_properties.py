"""Properties of the native parser: valid documents round-trip, and no input makes it crash."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.model import DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.names import validate_extended_resource_name
from hcs_deviceplugin.pools.native import parse_native, parse_native_data

SOURCE = "generated.yaml"

LABEL = r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"
labels = st.from_regex(rf"\A{LABEL}\Z")
subdomains = st.from_regex(rf"\A{LABEL}(\.{LABEL}){{0,3}}\Z")
prefixes = subdomains.filter(
    lambda p: (
        validate_extended_resource_name(f"cluster.{p}/x") is None
        and validate_extended_resource_name(f"{p}/x") is None
    )
)
# Identity values are opaque strings: anything printable, including things YAML would read as other
# types if unquoted ("1:30", "yes", "0x1f", "null") — dumping must quote them and parsing keep them.
opaque = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\ufeff"),
    min_size=1,
    max_size=20,
) | st.sampled_from(["1:30", "yes", "0x1f", "null", "~", "0000:17:00.0", "1e5"])
pci_addresses = st.from_regex(r"\A[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]\Z")


@dataclass(frozen=True)
class Entry:
    """One generated device entry: what the document says and what the parser must give back."""

    raw: dict[str, str]
    selector: DeviceSelector


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    kind = draw(st.sampled_from(["uuid", "inventoryID", "pciAddress"]))
    value = draw(pci_addresses if kind == "pciAddress" else opaque)
    node = draw(st.none() | subdomains)
    raw = {kind: value} | ({"node": node} if node is not None else {})
    fields = {"uuid": "uuid", "inventoryID": "inventory_id", "pciAddress": "pci_address"}
    stored = value.lower() if kind == "pciAddress" else value
    return Entry(raw, DeviceSelector(**{fields[kind]: stored}, node=node))


def _card_key(entry: Entry) -> tuple[str, str]:
    # One entry per (key, value): entries that may name the same card would be a (tested) error.
    return next((k, v.lower()) for k, v in entry.raw.items() if k != "node")


@st.composite
def documents(draw: st.DrawFn) -> tuple[dict[str, Any], list[Pool]]:
    prefix = draw(st.none() | prefixes)
    names = draw(st.lists(labels, unique=True, max_size=5))
    raw_pools: list[dict[str, Any]] = []
    expected: list[Pool] = []
    for name in names:
        raw: dict[str, Any] = {"name": name}
        scope = draw(st.sampled_from([None, "node", "cluster"]))
        if scope is not None:
            raw["scope"] = scope
        unit_text = draw(st.sampled_from([None, "Card", "Partition", "MIG"]))
        unit = UnitKind.CARD if unit_text in (None, "Card") else UnitKind.PARTITION
        if unit_text is not None:
            raw["unit"] = unit_text
        profile = draw(opaque) if unit is UnitKind.PARTITION else None
        if profile is not None:
            raw["profile"] = profile
        slices = draw(st.none() | st.integers(1, 64))
        if slices is not None:
            raw["slicesPerUnit"] = slices
        cap = draw(st.none() | st.integers(1, 10_000))
        if cap is not None:
            raw["maxDevicesPerNode"] = cap
        devices = draw(st.lists(entries(), unique_by=_card_key, max_size=6))
        write_empty_list = draw(st.booleans())
        if devices or write_empty_list:
            raw["devices"] = [e.raw for e in devices]
        base = prefix or "gpu.deckhouse.io"
        domain = f"cluster.{base}" if scope == "cluster" else base
        raw_pools.append(raw)
        expected.append(
            Pool(
                name=name,
                resource_name=f"{domain}/{name}",
                unit=unit,
                slices_per_unit=slices or 1,
                profile=profile,
                max_devices_per_node=cap,
                devices=tuple(e.selector for e in devices),
                source=SOURCE,
            )
        )
    document: dict[str, Any] = {"version": "v1", "pools": raw_pools}
    if prefix is not None:
        document["resourcePrefix"] = prefix
    return document, expected


@settings(max_examples=150, deadline=None)
@given(documents(), st.sampled_from(["yaml-block", "yaml-flow", "json"]))
def test_valid_documents_round_trip(generated: tuple[dict[str, Any], list[Pool]], style: str) -> None:
    document, expected = generated
    if style == "json":
        assert parse_native(json.dumps(document, indent="\t"), SOURCE, "json") == expected
    else:
        text = yaml.safe_dump(document, allow_unicode=True, default_flow_style=style == "yaml-flow")
        assert parse_native(text, SOURCE) == expected


# Arbitrary YAML-shaped data, biased toward the real keys so that deep branches are reached.
keys = st.sampled_from(
    [
        *("version", "pools", "resourcePrefix", "name", "unit", "scope", "profile", "slicesPerUnit"),
        *("maxDevicesPerNode", "devices", "uuid", "inventoryID", "pciAddress", "node", "x"),
    ]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 70)
    | st.floats(allow_nan=False)
    | st.sampled_from(["v1", "Card", "Partition", "MIG", "cluster", "a", "0000:17:00.0", "", "A_B"])
)
shapes = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys | st.integers(0, 2), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(shapes)
def test_any_data_gives_pools_or_config_errors(data: object) -> None:
    try:
        pools = parse_native_data(data, SOURCE)
    except ConfigErrors as exc:
        assert exc.errors
        assert all(e.source == SOURCE and e.path and e.message for e in exc.errors)
    else:
        assert all(isinstance(p, Pool) for p in pools)
