"""The generated ``api_wire`` codecs agree with protobuf itself, for every message of every proto.

Random messages are drawn from each message's protobuf descriptor (so a field the generator forgot
would be drawn and then missed), built both as a protobuf message and as ours, and each side's bytes
are decoded by the other. Random and truncated bytes show that ours either decode to what protobuf
decodes or fail with our :class:`DecodeError`, never another exception.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from google.protobuf import message as pb_message
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp_pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as dp_wire
from hcs_deviceplugin.api.dra.v1 import api_pb2 as dra_v1_pb
from hcs_deviceplugin.api.dra.v1 import api_wire as dra_v1_wire
from hcs_deviceplugin.api.dra.v1beta1 import api_pb2 as dra_v1beta1_pb
from hcs_deviceplugin.api.dra.v1beta1 import api_wire as dra_v1beta1_wire
from hcs_deviceplugin.api.drahealth.v1 import api_pb2 as health_v1_pb
from hcs_deviceplugin.api.drahealth.v1 import api_wire as health_v1_wire
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2 as health_pb
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_wire as health_wire
from hcs_deviceplugin.api.pluginregistration.v1 import api_pb2 as reg_pb
from hcs_deviceplugin.api.pluginregistration.v1 import api_wire as reg_wire
from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr_pb
from hcs_deviceplugin.api.podresources.v1 import api_wire as pr_wire
from hcs_deviceplugin.api.wireformat import DecodeError

PAIRS = (
    (dp_pb, dp_wire),
    (pr_pb, pr_wire),
    (reg_pb, reg_wire),
    (dra_v1_pb, dra_v1_wire),
    (dra_v1beta1_pb, dra_v1beta1_wire),
    (health_pb, health_wire),
    (health_v1_pb, health_v1_wire),
)
MESSAGES = [(pb, wire, name) for pb, wire in PAIRS for name in pb.DESCRIPTOR.message_types_by_name]
IDS = [f"{pb.DESCRIPTOR.package}.{name}" for pb, _, name in MESSAGES]

Tree = dict[str, Any]
"""A message as plain values: field name → value, None for an absent message or optional field."""

RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_ENUM: (-(2**31), 2**31 - 1),  # proto3 enums are open: any int32 is kept
}
TEXT = st.text(st.characters(codec="utf-8"), max_size=6)
"""Any Unicode a UTF-8 encoder accepts (lone surrogates are not strings protobuf can carry)."""


def is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def sub(field: FieldDescriptor) -> Descriptor:
    """The message type of a message (or map) field."""
    assert field.message_type is not None
    return field.message_type


def one_value(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return trees(sub(field))
    if field.type == FieldDescriptor.TYPE_STRING:
        return TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=6)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    low, high = RANGES[field.type]
    edges = st.sampled_from([low, high, 0, -1 if low < 0 else 1, 127, 128])
    return st.one_of(edges, st.integers(low, high))


def field_values(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if is_map(field):
        key, value = sub(field).fields_by_name["key"], sub(field).fields_by_name["value"]
        return st.dictionaries(one_value(key), one_value(value), max_size=3)
    if field.is_repeated:
        return st.lists(one_value(field), max_size=3)
    if field.has_presence:  # a message field, or a proto3 ``optional`` scalar
        return st.none() | one_value(field)
    return one_value(field)


def trees(descriptor: Descriptor) -> st.SearchStrategy[Tree]:
    return st.fixed_dictionaries({f.name: field_values(f) for f in descriptor.fields})


def to_pb(tree: Tree, module: ModuleType, descriptor: Descriptor) -> Any:
    message = getattr(module, descriptor.name)()
    for field in descriptor.fields:
        value = tree[field.name]
        target: Any = getattr(message, field.name) if field.is_repeated or field.message_type else None
        if is_map(field):
            value_field = sub(field).fields_by_name["value"]
            for key, item in value.items():
                if value_field.message_type is not None:
                    target[key].CopyFrom(to_pb(item, module, value_field.message_type))
                else:
                    target[key] = item
        elif field.is_repeated and field.message_type is not None:
            target.extend(to_pb(item, module, field.message_type) for item in value)
        elif field.is_repeated:
            target.extend(value)
        elif field.message_type is not None:
            if value is not None:
                target.SetInParent()
                target.CopyFrom(to_pb(value, module, field.message_type))
        elif value is not None:
            setattr(message, field.name, value)
    return message


def to_wire(tree: Tree, module: ModuleType, descriptor: Descriptor) -> Any:
    arguments: dict[str, Any] = {}
    for field in descriptor.fields:
        value = tree[field.name]
        if is_map(field):
            value_field = sub(field).fields_by_name["value"]
            if value_field.message_type is not None:
                value = {k: to_wire(v, module, value_field.message_type) for k, v in value.items()}
        elif field.message_type is not None and field.is_repeated:
            value = [to_wire(item, module, field.message_type) for item in value]
        elif field.message_type is not None and value is not None:
            value = to_wire(value, module, field.message_type)
        arguments[field.name] = value
    return getattr(module, descriptor.name)(**arguments)


@pytest.mark.parametrize(("pb", "wire", "name"), MESSAGES, ids=IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_side_reads_what_the_other_writes(
    pb: ModuleType, wire: ModuleType, name: str, data: st.DataObject
) -> None:
    descriptor = pb.DESCRIPTOR.message_types_by_name[name]
    tree = data.draw(trees(descriptor))
    theirs = to_pb(tree, pb, descriptor)
    ours = to_wire(tree, wire, descriptor)
    ours_bytes = ours.SerializeToString()
    assert type(theirs).FromString(ours_bytes) == theirs
    assert type(ours).FromString(theirs.SerializeToString()) == ours
    assert type(ours).FromString(ours_bytes) == ours


def test_every_message_of_every_proto_has_a_codec() -> None:
    """The property above runs over protobuf's list of messages: each must exist on our side too."""
    for pb, wire, name in MESSAGES:
        assert isinstance(getattr(wire, name, None), type), f"{pb.DESCRIPTOR.name}: {name}"
    assert len(MESSAGES) >= 60


@pytest.mark.parametrize(("pb", "wire", "name"), MESSAGES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_prefix_of_an_encoding_decodes_as_protobuf_does_or_fails_cleanly(
    pb: ModuleType, wire: ModuleType, name: str, data: st.DataObject
) -> None:
    descriptor = pb.DESCRIPTOR.message_types_by_name[name]
    encoded = to_pb(data.draw(trees(descriptor)), pb, descriptor).SerializeToString()
    cut = encoded[: data.draw(st.integers(0, len(encoded)))]
    agrees_with_protobuf(getattr(pb, name), getattr(wire, name), cut)


@pytest.mark.parametrize(("pb", "wire", "name"), MESSAGES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(raw=st.binary(max_size=24))
def test_random_bytes_decode_as_protobuf_does_or_fail_cleanly(
    pb: ModuleType, wire: ModuleType, name: str, raw: bytes
) -> None:
    agrees_with_protobuf(getattr(pb, name), getattr(wire, name), raw)


def agrees_with_protobuf(pb_class: Any, wire_class: Any, raw: bytes) -> None:
    """Ours decodes ``raw`` to what protobuf decodes, or raises our DecodeError (and nothing else).

    Ours may refuse what protobuf accepts only for groups, which proto3 never writes, and for a
    zero tag in a message of no fields: the encoding forbids field number 0 and we refuse it
    everywhere, while upb lets ``00 00 00 00`` through as an ``Empty`` (found by this test).
    """
    try:
        ours = wire_class.FromString(raw)
    except DecodeError:
        try:
            pb_class.FromString(raw)
        except pb_message.DecodeError:
            return
        lenient = has_group(raw) or (not pb_class.DESCRIPTOR.fields and any(b < 8 for b in raw))
        assert lenient, f"ours refused what protobuf reads: {raw!r}"
        return
    theirs = pb_class.FromString(raw)
    assert wire_class.FromString(theirs.SerializeToString()) == ours


def has_group(raw: bytes) -> bool:
    """Whether a group tag (wire type 3 or 4) could be anywhere in ``raw`` (a loose, safe check)."""
    return any(byte & 7 in (3, 4) for byte in raw)


@pytest.mark.parametrize("raw", [b"\x00\x00\x00\x00", b"\x05\x01\x01\x01\x01"], ids=["varint", "fixed32"])
def test_field_number_0_is_refused_even_in_a_message_of_no_fields(raw: bytes) -> None:
    """upb (protobuf 7) reads both as an ``Empty`` with an unknown field; the encoding forbids it."""
    from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire

    with pytest.raises(DecodeError, match="tag"):
        api_wire.Empty.FromString(raw)
