"""``sharing`` and ``memoryPerReplica`` in the native format: a backend-enforced sharing mode per pool."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.native import parse_native
from hcs_deviceplugin.pools.quantity import parse_bytes

GI = 1 << 30


def one(extra: str, slices: int = 4, unit: str = "Card") -> str:
    return f"version: v1\npools:\n  - name: p\n    unit: {unit}\n    slicesPerUnit: {slices}\n{extra}"


@pytest.mark.parametrize(
    ("extra", "sharing", "memory"),
    [
        ("", "", None),
        ("    sharing: timeSlicing\n", "", None),
        ("    sharing: mps\n", "mps", None),
        ("    sharing: mps\n    memoryPerReplica: 2Gi\n", "mps", 2 * GI),
        ("    sharing: mps\n    memoryPerReplica: 1536Mi\n", "mps", 1536 << 20),
        ("    sharing: mps\n    memoryPerReplica: 2G\n", "mps", 2 * 10**9),
        ("    sharing: mps\n    memoryPerReplica: 1073741824\n", "mps", GI),
    ],
)
def test_valid_sharing(extra: str, sharing: str, memory: int | None) -> None:
    [pool] = parse_native(one(extra), "pools.yaml")
    assert (pool.sharing, pool.memory_per_replica) == (sharing, memory)


@pytest.mark.parametrize(
    ("text", "path", "fragment"),
    [
        (one("    sharing: MPS\n"), "pools[0].sharing", "a backend's sharing mode"),
        (one("    sharing: mps\n", slices=1), "pools[0].slicesPerUnit", "at least 2 replicas"),
        (one("    memoryPerReplica: 2Gi\n"), "pools[0].memoryPerReplica", "needs a sharing mode"),
        (one("    sharing: mps\n    memoryPerReplica: 1.5Gi\n"), "pools[0].memoryPerReplica", "such as 2Gi"),
        (one("    sharing: mps\n    memoryPerReplica: 0\n"), "pools[0].memoryPerReplica", "such as 2Gi"),
        (one("    sharing: mps\n    memoryPerReplica: true\n"), "pools[0].memoryPerReplica", "such as 2Gi"),
        (
            one("    profile: 1g.10gb\n    sharing: mps\n", unit="Partition"),
            "pools[0].sharing",
            "needs unit: Card",
        ),
    ],
)
def test_invalid_sharing(text: str, path: str, fragment: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_native(text, "pools.yaml")
    [error] = caught.value.errors
    assert error.path == path
    assert fragment in error.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2Gi", 2 * GI),
        ("512Ki", 512 << 10),
        ("3M", 3 * 10**6),
        (" 7 ", 7),
        ("2gi", None),
        ("", None),
        ("-1", None),
    ],
)
def test_parse_bytes(text: str, expected: int | None) -> None:
    assert parse_bytes(text) == expected
