"""Malformed ConfigMaps never break the aggregator, and never cost the node its last good pools.

Each example starts from three valid objects, one per format, as the API would deliver them; then
one of them is mutated the way real configs go wrong — a wrong type, an unknown key, a missing key,
truncation, garbage characters, absurd nesting, a lost label or a renamed data key — and the set is
fed to the aggregator again. Whatever the mutation, ``update`` returns normally; if the mutated
object no longer parses on its own, the PoolSet is exactly the one before and the object's errors
are reported; if it still parses, its pools apply.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.formats import parse_configmap, parse_configmap_located
from hcs_deviceplugin.pools.located import LocatedPool
from hcs_deviceplugin.pools.objects import ConfigMapObject

NS = "d8-gpu-control-plane"
UUID = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
DEEP = "__deep__"

NATIVE_DOC: dict[str, Any] = {
    "version": "v1",
    "resourcePrefix": "gpu.deckhouse.io",
    "pools": [
        {
            "name": "native-a",
            "unit": "Card",
            "slicesPerUnit": 2,
            "maxDevicesPerNode": 4,
            "devices": [
                {"uuid": "GPU-1"},
                {"inventoryID": "k8s-w1-0-10de-2203"},
                {"pciAddress": "0000:17:00.0", "node": "k8s-w1"},
            ],
        },
        {"name": "native-mig", "unit": "Partition", "profile": "1g.10gb", "devices": [{"uuid": "GPU-2"}]},
    ],
}
DKP_DOC: dict[str, Any] = {
    "version": "v1",
    "flags": {
        "migStrategy": "none",
        "resourcePrefix": "gpu.deckhouse.io",
        "plugin": {"deviceIDStrategy": "uuid"},
    },
    "plugin": {"passDeviceSpecs": True, "deviceListStrategy": "envvar"},
    "resources": {
        "gpus": [{"pattern": UUID, "name": "gpu.deckhouse.io/team-a"}, {"pattern": "^$", "name": "team-a"}]
    },
    "sharing": {"timeSlicing": {"resources": [{"name": "team-a", "replicas": 4}]}},
}
ALLOWLIST = "k8s-w1-0-10de-2203\n  k8s-w1-1-10de-2203\n\nk8s-w2-0-10de-20b5\n"


def objects(native: str, dkp: str, allowlist: str) -> dict[str, ConfigMapObject]:
    return {
        "native": ConfigMapObject(
            "hcs-deviceplugin-pools",
            NS,
            {"pools.yaml": native},
            {},
            "1",
            f"configmap {NS}/hcs-deviceplugin-pools",
        ),
        # Named so that only the label makes it a DKP config: losing the label changes its format.
        "dkp": ConfigMapObject(
            "team-a-plugin-config",
            NS,
            {"config.yaml": dkp},
            {"app": "nvidia-device-plugin", "pool": "team-a"},
            "2",
            f"configmap {NS}/team-a-plugin-config",
        ),
        "allowlist": ConfigMapObject(
            "gpu-device-plugin-a100",
            NS,
            {"DP_ALLOWED_DEVICES": allowlist},
            {},
            "3",
            f"configmap {NS}/gpu-device-plugin-a100",
        ),
    }


BASE = objects(yaml.safe_dump(NATIVE_DOC), yaml.safe_dump(DKP_DOC), ALLOWLIST)
_BASE_PARSED = {id(obj): parse_configmap_located(obj, env={}) for obj in BASE.values()}


def parser(obj: ConfigMapObject) -> Sequence[LocatedPool]:
    """The formats' parser, without parsing the (unchanging) base objects again for every example."""
    cached = _BASE_PARSED.get(id(obj))
    return cached if cached is not None else parse_configmap_located(obj, env={})


WRONG_VALUES: st.SearchStrategy[Any] = st.sampled_from(
    [
        None,
        0,
        -1,
        65,
        10**30,
        True,
        False,
        1.5,
        float("inf"),
        "",
        " ",
        "x",
        "Card",
        "^$",
        "*",
        [],
        {},
        [[]],
        {"k": "v"},
    ]
)
ODD_TEXT = st.text(
    alphabet=st.characters(codec=None, categories=("L", "N", "P", "S", "Z", "Cc", "Cs", "Co")),
    min_size=1,
    max_size=12,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside plain YAML data."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


def at(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


@st.composite
def mutated_document(draw: st.DrawFn, document: dict[str, Any]) -> str:
    doc = copy.deepcopy(document)
    path = draw(st.sampled_from(paths(doc)[1:]))
    parent, last = at(doc, path[:-1]), path[-1]
    how = draw(st.sampled_from(["wrong-type", "unknown-key", "delete", "deep"]))
    if how == "wrong-type":
        parent[last] = draw(WRONG_VALUES)
    elif how == "unknown-key":
        target = parent if isinstance(parent, dict) else doc
        target[draw(ODD_TEXT | st.sampled_from(["Pools", "slicePerUnit", "sharing ", "gpu", "imex"]))] = draw(
            WRONG_VALUES
        )
    elif how == "delete":
        del parent[last]
    else:
        parent[last] = DEEP
    text = yaml.safe_dump(doc, allow_unicode=True)
    if how == "deep":
        depth = draw(st.integers(1, 3000))
        flow = draw(st.booleans())
        text = text.replace(DEEP, "[" * depth + "]" * depth if flow else "\n" + "- " * depth + "x")
    return text


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str:
    how = draw(st.sampled_from(["truncate", "garbage", "bytes"]))
    cut = draw(st.integers(0, len(text)))
    if how == "truncate":
        return text[:cut]
    if how == "garbage":
        return text[:cut] + draw(ODD_TEXT) + text[cut:]
    return text[:cut] + draw(st.binary(min_size=1, max_size=16)).decode("latin-1") + text[cut:]


@st.composite
def mutated_metadata(draw: st.DrawFn, obj: ConfigMapObject) -> ConfigMapObject:
    how = draw(st.sampled_from(["drop-labels", "rename-key", "extra-key", "no-data"]))
    if how == "drop-labels":
        return replace(obj, labels={})
    if how == "no-data":
        return replace(obj, data={})
    [(key, value)] = obj.data.items()
    if how == "rename-key":
        return replace(
            obj, data={draw(st.sampled_from(["config.yml", "pools.yaml", "DP_ALLOWED", "x.json"])): value}
        )
    return replace(obj, data={key: value, draw(st.sampled_from(["README", "more.yaml", ".hidden"])): "a: [1"})


@st.composite
def mutation(draw: st.DrawFn) -> tuple[str, ConfigMapObject]:
    """(which base object, its mutated copy): same identity, new version, broken content."""
    which = draw(st.sampled_from(["native", "dkp", "allowlist"]))
    obj = BASE[which]
    [(key, text)] = obj.data.items()
    how = draw(
        st.sampled_from(["document", "text", "metadata"] if which != "allowlist" else ["text", "metadata"])
    )
    if how == "metadata":
        mutated = draw(mutated_metadata(obj))
    else:
        source = {"native": NATIVE_DOC, "dkp": DKP_DOC}.get(which)
        new_text = (
            draw(mutated_document(source)) if how == "document" and source else draw(mutated_text(text))
        )
        mutated = replace(obj, data={key: new_text})
    return which, replace(mutated, resource_version="10")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[PoolSet, list[ConfigError]]] = []

    def __call__(self, pools: PoolSet, errors: list[ConfigError]) -> None:
        self.calls.append((pools, errors))


def test_base_objects_are_valid() -> None:
    aggregator = PoolAggregator(Recorder(), parser=lambda o: parse_configmap_located(o, env={}))
    pools, errors = aggregator.update("api", list(BASE.values()))
    assert (pools.names(), errors) == (["a100", "native-a", "native-mig", "team-a"], [])


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation())
def test_malformed_configmaps_keep_the_last_good_poolset(mutated: tuple[str, ConfigMapObject]) -> None:
    which, obj = mutated
    recorder = Recorder()
    aggregator = PoolAggregator(recorder, parser=parser)
    good, _ = aggregator.update("api", list(BASE.values()))

    pools, errors = aggregator.update("api", [obj if name == which else o for name, o in BASE.items()])

    assert not any("internal error" in e.message for e in errors), errors
    try:
        alone = parse_configmap(obj, env={})
    except ConfigErrors as exc:
        assert exc.errors and all(e.source == obj.source and e.path and e.message for e in exc.errors)
        assert pools == good, "a broken object keeps its last good version"
        assert errors == exc.errors
        assert recorder.calls[-1] == (good, errors)
    else:
        lost = {e.path for e in errors}
        assert all("is also defined in" in e.message for e in errors), errors
        for pool in alone:
            assert pool in pools.pools or any(pool.source == e.source for e in errors), pool
        assert len(lost) == len(errors)
