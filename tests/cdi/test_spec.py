"""The spec document from ContainerEdits: tables for each field, and the schema on every result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.cdi.hostnodes import node_facts, read_facts
from hcs_deviceplugin.cdi.spec import CDI_VERSION, NodeFacts, build_spec, device_edits, device_node, mount
from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount
from tests.cdi.runtime import validate_spec

KIND = "hcs.deckhouse.io/gpu"
CARD = DeviceNode("/dev/card0", "/dev/card0", "rw")


@pytest.mark.parametrize(
    ("node", "facts", "expected"),
    [
        pytest.param(
            CARD, None, {"path": "/dev/card0", "hostPath": "/dev/card0", "permissions": "rw"}, id="no-facts"
        ),
        pytest.param(
            DeviceNode("/dev/davinci3", "/dev/vdavinci103", "rw"),
            NodeFacts("c", 236, 103),
            {
                "path": "/dev/davinci3",
                "hostPath": "/dev/vdavinci103",
                "type": "c",
                "major": 236,
                "minor": 103,
                "permissions": "rw",
            },
            id="renamed-char-device",
        ),
        pytest.param(
            DeviceNode("/dev/x", "/dev/x", ""), None, {"path": "/dev/x", "hostPath": "/dev/x"}, id="no-perms"
        ),
    ],
)
def test_device_node(node: DeviceNode, facts: NodeFacts | None, expected: dict[str, object]) -> None:
    assert device_node(node, facts) == expected


@pytest.mark.parametrize(
    ("m", "first_option"),
    [
        pytest.param(Mount("/opt/hyhal", "/opt/hyhal", read_only=True), "ro", id="read-only"),
        pytest.param(Mount("/in", "/out", read_only=False), "rw", id="read-write"),
    ],
)
def test_mount(m: Mount, first_option: str) -> None:
    out = mount(m)
    assert out["hostPath"] == m.host_path and out["containerPath"] == m.container_path
    assert out["type"] == "bind" and out["options"][0] == first_option and "rbind" in out["options"]


def test_env_stays_out_of_the_spec() -> None:
    """Visible-devices variables describe a set: CDI would let the last device's value win."""
    edits = ContainerEdits(env={"X_VISIBLE_DEVICES": "3"}, devices=(CARD,))
    assert device_edits(edits, {}) == {"deviceNodes": [device_node(CARD, None)]}


def test_entries_without_nodes_or_mounts_are_left_out_and_an_empty_spec_is_none() -> None:
    env_only = ContainerEdits(env={"A": "1"})
    assert build_spec(KIND, [("a", env_only)], {}) is None
    spec = build_spec(KIND, [("b", ContainerEdits(devices=(CARD,))), ("a", env_only)], {})
    assert spec is not None
    assert [d["name"] for d in spec["devices"]] == ["b"]
    assert spec["cdiVersion"] == CDI_VERSION and spec["kind"] == KIND
    validate_spec(spec)


def test_facts_are_looked_up_by_host_path() -> None:
    renamed = DeviceNode("/dev/davinci0", "/dev/vdavinci100", "rw")
    spec = build_spec(
        KIND, [("v", ContainerEdits(devices=(renamed,)))], {"/dev/vdavinci100": NodeFacts("c", 1, 2)}
    )
    assert spec is not None
    node = spec["devices"][0]["containerEdits"]["deviceNodes"][0]
    assert (node["type"], node["major"], node["minor"]) == ("c", 1, 2)


paths = st.from_regex(r"/dev/[a-z]{1,8}[0-9]{0,3}", fullmatch=True)
device_nodes = st.builds(DeviceNode, paths, paths, st.sampled_from(["rw", "r", "rwm"]))
mounts = st.builds(Mount, paths, paths, st.booleans())
edits_strategy = st.builds(
    ContainerEdits,
    env=st.dictionaries(st.from_regex(r"[A-Z_]{1,8}", fullmatch=True), st.text(max_size=5), max_size=2),
    devices=st.lists(device_nodes, max_size=3).map(tuple),
    mounts=st.lists(mounts, max_size=2).map(tuple),
)


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.:-]{0,10}[A-Za-z0-9])?", fullmatch=True), edits_strategy
    ),
    st.dictionaries(
        paths, st.builds(NodeFacts, st.sampled_from(["c", "b"]), st.integers(0, 4095), st.integers(0, 2**20))
    ),
)
def test_every_built_spec_is_schema_valid(
    devices: dict[str, ContainerEdits], facts: dict[str, NodeFacts]
) -> None:
    spec = build_spec(KIND, list(devices.items()), facts)
    with_files = [n for n, e in devices.items() if e.devices or e.mounts]
    if not with_files:
        assert spec is None
        return
    assert spec is not None
    validate_spec(spec)
    assert [d["name"] for d in spec["devices"]] == sorted(with_files)


def test_node_facts_of_a_real_character_device() -> None:
    st_null = os.stat("/dev/null")
    facts = node_facts(Path("/"), "/dev/null")
    assert facts is not None
    assert (facts.type, facts.major, facts.minor) == (
        "c",
        os.major(st_null.st_rdev),
        os.minor(st_null.st_rdev),
    )


def test_node_facts_read_under_the_host_root(tmp_path: Path) -> None:
    """A regular file (the fakes' /dev) or a missing path gives no numbers; the runtime stats it then."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "card0").write_text("")
    assert node_facts(tmp_path, "/dev/card0") is None
    assert node_facts(tmp_path, "/dev/missing") is None
    assert node_facts(tmp_path, "/dev/null") is None, "read under the host root, not /"
    assert read_facts(Path("/"), ["/dev/null", "/dev/null", "/nonexistent"]).keys() == {"/dev/null"}
