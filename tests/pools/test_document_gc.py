"""The fast YAML path pauses the cyclic garbage collector while it composes; it must give it back
as it found it, whether the document loads or is refused."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from hcs_deviceplugin.pools.document import load_document
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.native import parse_native


@pytest.fixture
def restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize(
    ("text", "fails"),
    [
        ("pools: [{name: a}]\n", False),
        ("pools: [{name: a}, {name: a, name: b}]\n", True),  # duplicate key, raised from the build
        ("pools: " + "[" * 40 + "]" * 40 + "\n", True),  # beyond the depth bound
    ],
)
def test_the_collector_is_left_as_it_was(restore_gc: None, enabled: bool, text: str, fails: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    if fails:
        with pytest.raises(ConfigErrors):
            load_document(text, "test")
    else:
        assert load_document(text, "test") == {"pools": [{"name": "a"}]}
    assert gc.isenabled() is enabled


def test_no_collection_runs_while_a_large_document_is_composed(restore_gc: None) -> None:
    text = "pools:\n" + "".join(f"- {{name: p{n}, devices: [{{uuid: u{n}}}]}}\n" for n in range(2000))
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.enable()
    gc.callbacks.append(count)
    try:
        pools = load_document(text, "test")
    finally:
        gc.callbacks.remove(count)
    assert isinstance(pools, dict) and len(pools["pools"]) == 2000
    assert len(collections) <= 1  # at most the one due once the collector runs again (some 50 without)
    assert gc.isenabled()


def test_no_collection_runs_while_a_native_document_is_read_and_validated(restore_gc: None) -> None:
    text = "version: v1\npools:\n" + "".join(
        f"- {{name: p{n}, devices: [{{uuid: GPU-{n}}}]}}\n" for n in range(2000)
    )
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.enable()
    gc.callbacks.append(count)
    try:
        pools = parse_native(text, "test")
    finally:
        gc.callbacks.remove(count)
    assert len(pools) == 2000
    assert len(collections) <= 1  # at most the one due once the collector runs again (some 50 without)
    assert gc.isenabled()
