"""The daemon tests use the integration tests' node: kubelet simulator, simulated backend, pools volume."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import Node, fresh_node


@pytest.fixture
def node() -> Iterator[Node]:
    with fresh_node() as n:
        yield n
