"""The simulator's pure rules, pinned without sockets: kubelet's validation, device choice, checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim import AllocationRecord, CheckpointError, checkpoint
from hcs_deviceplugin.kubeletsim.allocations import choose_devices, group_by_numa, pod_uid
from hcs_deviceplugin.kubeletsim.registration import (
    is_extended_resource_name,
    plugin_socket_path,
    request_error,
    version_error,
)

LONG_PREFIX_OK = "a" * (253 - len("requests.") - 4) + ".com"  # "requests." + prefix is exactly 253


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("hcs.example.com/foo", True),
        ("gpu.deckhouse.io/a100-80gb", True),
        ("example.com/Foo_bar.baz-1", True),
        ("example.com/" + "a" * 63, True),
        (LONG_PREFIX_OK + "/x", True),
        ("a" + LONG_PREFIX_OK + "/x", False),  # one over 253 once "requests." is prepended
        ("example.com/" + "a" * 64, False),
        ("foo", False),  # no namespace: a native resource
        ("kubernetes.io/foo", False),
        ("gpu.kubernetes.io/foo", False),  # native namespace anywhere in the name
        ("requests.example.com/foo", False),
        ("Example.com/foo", False),  # prefix must be a lower-case DNS subdomain
        ("example.com/-foo", False),
        ("example.com/foo-", False),
        ("example.com/", False),
        ("/foo", False),
        ("a/b/c", False),
        ("exa_mple.com/foo", False),
    ],
)
def test_extended_resource_names_follow_kubelet(name: str, valid: bool) -> None:
    assert is_extended_resource_name(name) is valid


def test_version_error_uses_kubelets_text() -> None:
    assert version_error("v1beta1") is None
    assert version_error("v1alpha") == (
        'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]'
    )


def test_request_error_checks_version_before_name() -> None:
    bad_both = dp.RegisterRequest(version="v2", resource_name="foo")
    assert (request_error(bad_both) or "").startswith('requested API version "v2"')
    bad_name = dp.RegisterRequest(version="v1beta1", resource_name="foo")
    assert request_error(bad_name) == 'the ResourceName "foo" is invalid'
    good = dp.RegisterRequest(version="v1beta1", resource_name="hcs.example.com/x", endpoint="x.sock")
    assert request_error(good) is None


def test_endpoint_is_joined_like_go_filepath_join() -> None:
    assert plugin_socket_path(Path("/dp"), "a.sock") == "/dp/a.sock"
    assert plugin_socket_path(Path("/dp"), "/a.sock") == "/dp/a.sock"
    assert plugin_socket_path(Path("/dp/"), "sub/../b.sock") == "/dp/b.sock"


@pytest.mark.parametrize(
    ("preferred", "count", "chosen"),
    [
        (None, 2, ("d0", "d1")),
        (["d3", "d1"], 2, ("d1", "d3")),  # honoured as a set, not as an order
        (["zz", "d2"], 2, ("d0", "d2")),  # unknown ID ignored, shortfall filled in sorted order
        (["d3", "d2", "d1"], 2, ("d1", "d2")),  # too many: kubelet takes the sorted first ones
        ([], 1, ("d0",)),
    ],
)
def test_choose_devices_trusts_the_plugin_only_within_available(
    preferred: list[str] | None, count: int, chosen: tuple[str, ...]
) -> None:
    assert choose_devices({"d0", "d1", "d2", "d3"}, count, preferred) == chosen


def test_choose_devices_refuses_more_than_available() -> None:
    with pytest.raises(ValueError):
        choose_devices({"d0"}, 2, None)


def test_group_by_numa_puts_multi_numa_devices_under_each_node() -> None:
    numa = {"a": [0], "b": [0, 1], "c": []}
    assert group_by_numa(["a", "b", "c"], numa) == {-1: ("c",), 0: ("a", "b"), 1: ("b",)}


def _record() -> AllocationRecord:
    response = dp.ContainerAllocateResponse(envs={"A": "1"}, cdi_devices=[dp.CDIDevice(name="x.com/d=0")])
    return AllocationRecord(
        namespace="ns",
        pod="p",
        container="c",
        resource="hcs.example.com/x",
        device_ids=("d0", "d1"),
        response=response,
        pod_uid=pod_uid("ns", "p"),
        devices_by_numa={0: ("d0",), 1: ("d1",)},
    )


def test_checkpoint_round_trips_in_kubelets_layout(tmp_path: Path) -> None:
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    checkpoint.write(path, [_record()], {"hcs.example.com/x": ["d0", "d1", "d2"]})

    document = json.loads(path.read_text())
    assert set(document) == {"Data", "Checksum"}
    entry = document["Data"]["PodDeviceEntries"][0]
    assert entry["PodUID"] == pod_uid("ns", "p")
    assert entry["DeviceIDs"] == {"0": ["d0"], "1": ["d1"]}
    assert entry["ContainerName"] == "c" and entry["ResourceName"] == "hcs.example.com/x"
    assert document["Data"]["RegisteredDevices"] == {"hcs.example.com/x": ["d0", "d1", "d2"]}

    loaded = checkpoint.read(path)
    assert loaded is not None
    assert loaded.allocations == (_record(),)
    assert loaded.registered_devices == {"hcs.example.com/x": ("d0", "d1", "d2")}
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.CHECKPOINT_NAME]  # no temp file left


def test_checkpoint_with_wrong_checksum_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    checkpoint.write(path, [_record()], {})
    document = json.loads(path.read_text())
    document["Data"]["PodDeviceEntries"][0]["DeviceIDs"] = {"-1": ["stolen"]}
    path.write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="checksum"):
        checkpoint.read(path)
    path.write_text("{not json")
    with pytest.raises(CheckpointError):
        checkpoint.read(path)
    assert checkpoint.read(tmp_path / "missing") is None
