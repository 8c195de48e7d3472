"""The codec generator on protos of our own making: every scalar kind it supports (including the ones
kubelet's APIs do not use: bytes, uint32, repeated bool, maps with number keys) agrees with protobuf,
and what it does not support is refused by name instead of being generated wrong."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.api.wiregen import UnsupportedProto, generate_module
from tests.core.test_wire_codecs import to_pb, to_wire, trees

FD = descriptor_pb2.FieldDescriptorProto


def field(name: str, number: int, kind: int, repeated: bool = False, type_name: str = "") -> FD:
    label = FD.LABEL_REPEATED if repeated else FD.LABEL_OPTIONAL
    made = FD(name=name, number=number, type=kind, label=label)  # type: ignore[arg-type]
    if type_name:
        made.type_name = type_name
    return made


def synthetic() -> descriptor_pb2.FileDescriptorProto:
    """``package synth;`` with one message of every supported kind, a map keyed by numbers, an enum."""
    file = descriptor_pb2.FileDescriptorProto(name="synth/v1/api.proto", package="synth", syntax="proto3")
    file.enum_type.add(name="Mode").value.extend(
        [descriptor_pb2.EnumValueDescriptorProto(name=n, number=i) for i, n in enumerate(("OFF", "ON"))]
    )
    leaf = file.message_type.add(name="Leaf")
    leaf.field.extend([field("blob", 1, FD.TYPE_BYTES), field("small", 2, FD.TYPE_UINT32)])
    every = file.message_type.add(name="Every")
    entry = every.nested_type.add(name="ByNumberEntry")
    entry.options.map_entry = True
    entry.field.extend(
        [field("key", 1, FD.TYPE_INT64), field("value", 2, FD.TYPE_MESSAGE, type_name=".synth.Leaf")]
    )
    every.field.extend(
        [
            field("flags", 1, FD.TYPE_BOOL, repeated=True),
            field("sizes", 2, FD.TYPE_UINT32, repeated=True),
            field("big", 3, FD.TYPE_UINT64, repeated=True),
            field("blobs", 4, FD.TYPE_BYTES, repeated=True),
            field("mode", 5, FD.TYPE_ENUM, type_name=".synth.Mode"),
            field("modes", 6, FD.TYPE_ENUM, repeated=True, type_name=".synth.Mode"),
            field("leaf", 7, FD.TYPE_MESSAGE, type_name=".synth.Leaf"),
            field("by_number", 8, FD.TYPE_MESSAGE, repeated=True, type_name=".synth.Every.ByNumberEntry"),
            field("delta", 9, FD.TYPE_INT32, repeated=True),
            field("on", 2047, FD.TYPE_BOOL),  # a two-byte tag
        ]
    )
    return file


def load(file: descriptor_pb2.FileDescriptorProto) -> tuple[ModuleType, Any]:
    """The generated module, executed, and protobuf's classes for the same file."""
    wire = ModuleType("synth_wire")
    exec(compile(generate_module(file), "synth_wire.py", "exec"), wire.__dict__)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    classes = {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"synth.{name}"))
        for name in ("Leaf", "Every")
    }
    return wire, SimpleNamespace(**classes)


WIRE, PB = load(synthetic())
EVERY: Descriptor = PB.Every.DESCRIPTOR


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_supported_kind_agrees_with_protobuf(data: st.DataObject) -> None:
    tree = data.draw(trees(EVERY))
    theirs = to_pb(tree, PB, EVERY)
    ours = to_wire(tree, WIRE, EVERY)
    assert PB.Every.FromString(ours.SerializeToString()) == theirs
    assert WIRE.Every.FromString(theirs.SerializeToString()) == ours


def test_repeated_numbers_are_written_packed() -> None:
    every = WIRE.Every(sizes=[1, 2], flags=[True, False], on=True)
    assert every.SerializeToString() == b"\x0a\x02\x01\x00\x12\x02\x01\x02\xf8\x7f\x01"


def refused(mutate: Any) -> str:
    file = synthetic()
    mutate(file)
    with pytest.raises(UnsupportedProto) as caught:
        generate_module(file)
    return str(caught.value)


def test_what_the_generator_cannot_express_is_refused_by_name() -> None:
    def oneof(file: Any) -> None:
        message = file.message_type[0]
        message.oneof_decl.add(name="choice")
        message.field[0].oneof_index = 0

    def nested(file: Any) -> None:
        file.message_type[0].nested_type.add(name="Inner")

    def double(file: Any) -> None:
        file.message_type[0].field.append(field("ratio", 3, FD.TYPE_DOUBLE))

    def sint(file: Any) -> None:
        file.message_type[0].field.append(field("zigzag", 3, FD.TYPE_SINT64))

    def clash(file: Any) -> None:
        file.message_type[0].field.append(field("self", 3, FD.TYPE_STRING))

    def foreign(file: Any) -> None:
        file.message_type[0].field.append(field("stamp", 3, FD.TYPE_MESSAGE, type_name=".google.Timestamp"))

    assert "Leaf.blob: oneofs are not supported" in refused(oneof)
    assert "Leaf.Inner: nested messages are not supported" in refused(nested)
    assert "Leaf.ratio: field type 1 is not supported" in refused(double)
    assert "Leaf.zigzag: field type 18 is not supported" in refused(sint)
    assert "Leaf.self: the name clashes with generated code" in refused(clash)
    assert "Leaf.stamp: type .google.Timestamp is not in this file" in refused(foreign)
