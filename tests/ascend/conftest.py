"""Harness for Ascend tests: the fake libdcmi, built once per session, and fake nodes on disk.

``fake_dcmi_lib`` is the library every test shares (ctypes keeps one copy per path loaded, so tests
switch nodes by pointing ``$HCS_FAKE_DCMI_NODE`` at a new node file, which the next ``dcmi_init``
reads). ``fake_dcmi_without(*names)`` builds a variant lacking those symbols (an older driver).
``prepare_fake_ascend_node(description)`` writes a node under the test's tmp dir and points the
environment at it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from vendors.ascend.fake import NODE_ENV, FakeAscendNode, build_fake_dcmi
from vendors.ascend.fake import prepare_fake_ascend_node as prepare_node


@pytest.fixture(scope="session")
def fake_dcmi_build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fake-dcmi")


@pytest.fixture(scope="session")
def fake_dcmi_lib(fake_dcmi_build_dir: Path) -> Path:
    return build_fake_dcmi(fake_dcmi_build_dir)


@pytest.fixture(scope="session")
def fake_dcmi_without(fake_dcmi_build_dir: Path) -> Callable[..., Path]:
    """``fake_dcmi_without("dcmi_get_device_die_v2", ...)`` → a library lacking those symbols (cached)."""

    def build(*names: str) -> Path:
        return build_fake_dcmi(fake_dcmi_build_dir, omit=names)

    return build


@pytest.fixture
def prepare_fake_ascend_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dcmi_build_dir: Path
) -> Callable[..., FakeAscendNode]:
    """Factory: ``prepare_fake_ascend_node(node_910b(), omit=())`` → a FakeAscendNode with its env set.

    Each call writes a fresh node folder under the test's tmp dir (so the fake re-reads it on the next
    ``dcmi_init``) and sets ``$HCS_FAKE_DCMI_NODE`` for the rest of the test.
    """
    count = 0

    def prepare(description: Mapping[str, Any], omit: Iterable[str] = ()) -> FakeAscendNode:
        nonlocal count
        count += 1
        node = prepare_node(tmp_path / f"node{count}", description, build_dir=fake_dcmi_build_dir, omit=omit)
        monkeypatch.setenv(NODE_ENV, str(node.files.node))
        return node

    return prepare
