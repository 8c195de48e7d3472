"""CDI names of units: valid by CDI's grammar, one per card or partition, never shared by two ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.cdi.delivery import annotation_key
from hcs_deviceplugin.cdi.names import backend_kinds, cdi_kind, device_name, spec_file_name, unit_names
from hcs_deviceplugin.model import Unit
from tests.cdi.runtime import DEVICE_NAME, KIND


@pytest.mark.parametrize(
    ("hardware_id", "expected"),
    [
        pytest.param(
            "GPU-fb7997af-015e-5593-a98f-d07392e85cd7", "GPU-fb7997af-015e-5593-a98f-d07392e85cd7", id="uuid"
        ),
        pytest.param("0000:3b:00.0", "0000:3b:00.0", id="pci-address"),
        pytest.param("MIG-1/2", "MIG-1-2-", id="slash-cleaned-and-hashed"),
        pytest.param("-x-", "x-", id="edges-trimmed-and-hashed"),
        pytest.param("///", "id-", id="nothing-left"),
    ],
)
def test_device_name(hardware_id: str, expected: str) -> None:
    name = device_name(hardware_id)
    assert name.startswith(expected) and DEVICE_NAME.fullmatch(name)
    assert (name == hardware_id) == (expected == hardware_id)


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_device_names_are_valid_and_distinct(a: str, b: str) -> None:
    assert DEVICE_NAME.fullmatch(device_name(a))
    if a != b:
        assert device_name(a) != device_name(b)


def test_replicas_and_partitions_name_their_hardware_once() -> None:
    kinds = {"nvidia": "hcs.deckhouse.io/gpu"}
    units = [
        Unit("GPU-1::0", "GPU-1", "nvidia", replica=0),
        Unit("GPU-1::1", "GPU-1", "nvidia", replica=1),
        Unit("MIG-2", "GPU-2", "nvidia", partition_id="MIG-2"),
    ]
    assert unit_names(units, kinds) == ("hcs.deckhouse.io/gpu=GPU-1", "hcs.deckhouse.io/gpu=MIG-2")


def test_kinds_per_backend_and_a_shared_class_falls_back_to_the_backend_name() -> None:
    kinds = backend_kinds({"nvidia": "gpu", "ascend": "npu", "other-gpu": "gpu"})
    assert kinds == {
        "ascend": "hcs.deckhouse.io/npu",
        "nvidia": "hcs.deckhouse.io/gpu",
        "other-gpu": "hcs.deckhouse.io/other-gpu",
    }
    assert all(KIND.fullmatch(k) for k in kinds.values())
    with pytest.raises(ValueError, match="not a valid kind name"):
        cdi_kind("a/b")


def test_spec_file_names_are_ours() -> None:
    assert spec_file_name("nvidia") == "hcs-deviceplugin-nvidia.json"


@given(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,250}[a-z0-9])?", fullmatch=True))
def test_annotation_keys_fit_kubernetes(pool: str) -> None:
    key = annotation_key(pool)
    prefix, name = key.split("/", 1)
    assert prefix == "cdi.k8s.io" and 0 < len(name) <= 63
    assert name[0].isalnum() and name[-1].isalnum()


def test_long_pool_names_keep_distinct_annotation_keys() -> None:
    a, b = "p" * 80 + "a", "p" * 80 + "b"
    assert annotation_key(a) != annotation_key(b)
