"""Hand-written bytes through the generated codecs: the wire rules one at a time, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as dp
from hcs_deviceplugin.api.dra.v1 import api_wire as dra
from hcs_deviceplugin.api.podresources.v1 import api_wire as pr
from hcs_deviceplugin.api.wireformat import DecodeError, EncodeError

MINUS_ONE = b"\xff" * 9 + b"\x01"
"""-1 as a varint: 64-bit two's complement, ten bytes."""

DECODES = [
    pytest.param(dp.NUMANode, b"\x08\x07", dp.NUMANode(ID=7), id="int64"),
    pytest.param(dp.NUMANode, b"\x08" + MINUS_ONE, dp.NUMANode(ID=-1), id="negative int64, ten bytes"),
    pytest.param(dp.NUMANode, b"\x08\x01\x08\x02", dp.NUMANode(ID=2), id="last scalar wins"),
    pytest.param(
        dp.ContainerPreferredAllocationRequest,
        b"\x18" + MINUS_ONE,
        dp.ContainerPreferredAllocationRequest(allocation_size=-1),
        id="negative int32 written as ten bytes",
    ),
    pytest.param(
        dp.ContainerPreferredAllocationRequest,
        b"\x18\xff\xff\xff\xff\x0f",
        dp.ContainerPreferredAllocationRequest(allocation_size=-1),
        id="int32 keeps its low 32 bits (five-byte -1)",
    ),
    pytest.param(
        dp.ContainerPreferredAllocationRequest,
        b"\x0a\x01a\x0a\x00\x12\x01m\x0a\x01b\x18\x02\x0a\x80\x01" + b"c" * 128 + b"\x0a\x01d",
        dp.ContainerPreferredAllocationRequest(
            available_deviceIDs=["a", "", "b", "c" * 128, "d"],
            must_include_deviceIDs=["m"],
            allocation_size=2,
        ),
        id="runs of a repeated string broken by other fields, an empty and a two-byte length",
    ),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x02ab\x0a\x02cd\x0a\x02ef\x0a\x01g\x0a\x02hi",
        dp.ContainerAllocateRequest(devices_ids=["ab", "cd", "ef", "g", "hi"]),
        id="a run of equal-length ids, then another length",
    ),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x02ab\x0a\x02" + "é".encode() + b"\x0a\x02cd",
        dp.ContainerAllocateRequest(devices_ids=["ab", "é", "cd"]),
        id="equal-length run with a non-ascii id",
    ),
    pytest.param(
        dp.ContainerPreferredAllocationRequest,
        b"\x0a\x01a\x0a\x01b\x12\x01m\x0a\x01c\x0a\x01d\x18\x08",
        dp.ContainerPreferredAllocationRequest(
            available_deviceIDs=["a", "b", "c", "d"], must_include_deviceIDs=["m"], allocation_size=8
        ),
        id="equal-length runs split by other fields",
    ),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x01\x0a\x0a\x01\x0a",
        dp.ContainerAllocateRequest(devices_ids=["\n", "\n"]),
        id="ids made of the tag byte",
    ),
    pytest.param(
        dp.AllocateRequest,
        b"\x0a\x06\x0a\x01a\x0a\x01b",
        dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["a", "b"])]),
        id="nested repeated strings",
    ),
    pytest.param(
        pr.AllocatableResourcesResponse,
        b"\x12\x03\x01\x02\x03",
        pr.AllocatableResourcesResponse(cpu_ids=[1, 2, 3]),
        id="packed repeated int64",
    ),
    pytest.param(
        pr.AllocatableResourcesResponse,
        b"\x10\x01\x12\x01\x02\x10\x03",
        pr.AllocatableResourcesResponse(cpu_ids=[1, 2, 3]),
        id="unpacked and packed mixed, in order",
    ),
    pytest.param(
        dp.DevicePluginOptions,
        b"\x08\x02\x10\x00",
        dp.DevicePluginOptions(pre_start_required=True),
        id="bool is any non-zero varint",
    ),
    pytest.param(
        dp.CDIDevice,
        b"\xf8\x06\x05\x89\x06\x00\x00\x00\x00\x00\x00\x00\x00\xfa\x06\x01x\xfd\x06\x00\x00\x00\x00\x0a\x01n",
        dp.CDIDevice(name="n"),
        id="unknown fields of every wire type skipped",
    ),
    pytest.param(dp.CDIDevice, b"\x08\x05", dp.CDIDevice(), id="known field, other wire type: unknown"),
    pytest.param(
        dp.RegisterRequest,
        b"\x22\x02\x08\x01\x22\x02\x10\x01",
        dp.RegisterRequest(
            options=dp.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)
        ),
        id="a message field seen twice is merged",
    ),
    pytest.param(
        dp.RegisterRequest,
        b"\x22\x00",
        dp.RegisterRequest(options=dp.DevicePluginOptions()),
        id="present but empty message",
    ),
    pytest.param(dp.RegisterRequest, b"", dp.RegisterRequest(), id="absent message is None"),
    pytest.param(
        dp.ContainerAllocateResponse,
        b"\x0a\x06\x0a\x01k\x12\x01a\x0a\x06\x0a\x01k\x12\x01b\x0a\x03\x0a\x01z",
        dp.ContainerAllocateResponse(envs={"k": "b", "z": ""}),
        id="map: last entry of a key wins, missing value is the default",
    ),
    pytest.param(
        dra.NodeUnprepareResourcesResponse,
        b"\x0a\x03\x0a\x01u",
        dra.NodeUnprepareResourcesResponse(claims={"u": dra.NodeUnprepareResourceResponse()}),
        id="map of messages: missing value is an empty message",
    ),
    pytest.param(
        pr.ClaimResource, b"\x2a\x00", pr.ClaimResource(share_id=""), id="optional string present and empty"
    ),
    pytest.param(pr.ClaimResource, b"", pr.ClaimResource(), id="optional string absent"),
    pytest.param(dp.Device, b"\x0a\x05" + "ü€".encode(), dp.Device(ID="ü€"), id="utf-8"),
]


@pytest.mark.parametrize(("cls", "raw", "expected"), DECODES)
def test_decodes(cls: Any, raw: bytes, expected: Any) -> None:
    assert cls.FromString(raw) == expected


MALFORMED = [
    pytest.param(dp.NUMANode, b"\x08", "truncated varint", id="tag without value"),
    pytest.param(dp.NUMANode, b"\x08\x80", "truncated varint", id="truncated varint"),
    pytest.param(dp.NUMANode, b"\x08" + b"\xff" * 10 + b"\x01", "longer than ten", id="eleven-byte varint"),
    pytest.param(dp.NUMANode, b"\x88", "truncated varint", id="truncated tag"),
    pytest.param(dp.CDIDevice, b"\x0a\x05ab", "runs past the end", id="length past the end"),
    pytest.param(
        dp.AllocateRequest, b"\x0a\x02\x0a\x05abcde", "runs past the end", id="length past the nested end"
    ),
    pytest.param(dp.CDIDevice, b"\x0a\x01\xff", "not valid UTF-8", id="invalid utf-8"),
    pytest.param(dp.CDIDevice, b"\x0a\x03\xed\xa0\x80", "not valid UTF-8", id="encoded surrogate"),
    pytest.param(dp.CDIDevice, b"\x0b\x0c", "group", id="start group"),
    pytest.param(dp.CDIDevice, b"\x0c", "group", id="end group"),
    pytest.param(dp.CDIDevice, b"\x0e\x00", "invalid wire type 6", id="wire type 6"),
    pytest.param(dp.CDIDevice, b"\x0f\x00", "invalid wire type 7", id="wire type 7"),
    pytest.param(dp.CDIDevice, b"\x02\x00", "invalid field tag", id="field number 0"),
    pytest.param(dp.CDIDevice, b"\x80\x80\x80\x80\x10", "invalid field tag", id="tag past 32 bits"),
    pytest.param(dp.CDIDevice, b"\x11\x00\x00", "truncated fixed-width", id="truncated fixed64"),
    pytest.param(dp.CDIDevice, b"\x15\x00", "truncated fixed-width", id="truncated fixed32"),
    pytest.param(pr.PodResources, b"\x22\x03\x01\x02\x80", "truncated varint", id="packed, cut varint"),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x01a\x0a\x01\xff",
        "not valid UTF-8",
        id="bad utf-8 later in a run",
    ),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x01a\x0a\x05ab",
        "runs past the end",
        id="run cut in its second id",
    ),
    pytest.param(dp.ContainerAllocateRequest, b"\x0a\x01a\x0a", "truncated varint", id="run ends on a tag"),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x01a\x0a\x01b\x0a\x01",
        "runs past the end",
        id="run cut in its last id",
    ),
    pytest.param(
        dp.ContainerAllocateRequest,
        b"\x0a\x01a\x0a\x01\xff\x0a\x01c",
        "not valid UTF-8",
        id="bad byte in a run",
    ),
]


@pytest.mark.parametrize(("cls", "raw", "message"), MALFORMED)
def test_malformed_input_is_a_decode_error(cls: Any, raw: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        cls.FromString(raw)


def test_a_decode_error_is_a_value_error() -> None:
    """Callers that caught protobuf's DecodeError as a ValueError keep working."""
    assert issubclass(DecodeError, ValueError)


ENCODES = [
    pytest.param(dp.NUMANode(ID=-1), b"\x08" + MINUS_ONE, id="negative int64"),
    pytest.param(
        dp.ContainerPreferredAllocationRequest(allocation_size=-2),
        b"\x18\xfe" + b"\xff" * 8 + b"\x01",
        id="negative int32 sign-extended to ten bytes",
    ),
    pytest.param(dp.NUMANode(), b"", id="defaults are not written"),
    pytest.param(pr.AllocatableResourcesResponse(cpu_ids=[1, 300]), b"\x12\x03\x01\xac\x02", id="packed"),
    pytest.param(pr.ClaimResource(share_id=""), b"\x2a\x00", id="optional written when set, even empty"),
    pytest.param(
        dp.RegisterRequest(options=dp.DevicePluginOptions()), b"\x22\x00", id="empty message still present"
    ),
]


@pytest.mark.parametrize(("message", "raw"), ENCODES)
def test_encodes(message: Any, raw: bytes) -> None:
    assert message.SerializeToString() == raw


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(dp.NUMANode(ID=2**63), id="int64 too large"),
        pytest.param(
            dp.ContainerPreferredAllocationRequest(allocation_size=-(2**31) - 1), id="int32 too small"
        ),
        pytest.param(pr.ContainerMemory(size=-1), id="negative uint64"),
        pytest.param(dp.CDIDevice(name="\ud800"), id="lone surrogate"),
    ],
)
def test_what_the_wire_cannot_carry_is_an_encode_error(message: Any) -> None:
    with pytest.raises(EncodeError):
        message.SerializeToString()


@given(
    runs=st.lists(
        st.tuples(st.integers(0, 130), st.integers(1, 40), st.sampled_from(["a", "é", "\n", "\x7f"])),
        max_size=6,
    ),
    must=st.lists(st.text(max_size=3), max_size=2),
)
def test_runs_of_ids_decode_as_protobuf_does(runs: list[tuple[int, int, str]], must: list[str]) -> None:
    """Runs of equal-length ids (the fast path) mixed with others, against upb's decoding; runs
    longer than the first window of ids looked at (16) and shorter ones, one after another."""
    ids = [char * length for length, count, char in runs for _ in range(count)]
    message = api_pb2.ContainerPreferredAllocationRequest(
        available_deviceIDs=ids, must_include_deviceIDs=must, allocation_size=3
    )
    raw = message.SerializeToString()
    ours = dp.ContainerPreferredAllocationRequest.FromString(raw)
    assert ours.available_deviceIDs == ids
    assert ours.must_include_deviceIDs == must
    assert ours.allocation_size == 3
