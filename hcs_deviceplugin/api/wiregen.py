"""Write plain-Python message codecs (``api_wire.py``) from the descriptors protoc gives.

Dev-time only, run by :mod:`hcs_deviceplugin.api.regenerate`: it reads a ``FileDescriptorSet``
(protobuf's own ``descriptor_pb2``), and what it writes imports nothing but
:mod:`hcs_deviceplugin.api.wireformat`, so the daemon loads no protobuf runtime. One class per
message, fields named exactly as in the proto (daemon code reads as it did with ``*_pb2``),
``__slots__``, a keyword constructor with proto3 defaults, ``SerializeToString`` and
``FromString``. Enums are ints, with one module constant per value as ``*_pb2`` has them.

Presence follows proto3: a scalar is written only when it is not its default; a message field is
``None`` when absent (so "absent" and "present but empty" stay apart, as ``HasField`` tells them);
a ``optional`` scalar is ``None`` when absent. A message field seen twice is merged, as protobuf
merges it; a scalar seen twice keeps the last value. What the generator cannot express (real
oneofs, nested non-map messages, types from another file, fixed-width and zigzag numbers) is
refused by name rather than written wrong.

The output is laid out as ``ruff format`` would lay it out, so the generated files need no
formatter and stay byte-identical to a fresh generation.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any

LINE_LENGTH = 110

# FieldDescriptorProto.Type and .Label values (descriptor.proto).
TYPE_INT64 = 3
TYPE_UINT64 = 4
TYPE_INT32 = 5
TYPE_BOOL = 8
TYPE_STRING = 9
TYPE_MESSAGE = 11
TYPE_BYTES = 12
TYPE_UINT32 = 13
TYPE_ENUM = 14
LABEL_REPEATED = 3

VARINT_TYPES = {
    # type: (python conversion of a decoded varint, bounds constant, kind name)
    TYPE_INT64: ("_w.as_int64({})", "_w.INT64", "int64"),
    TYPE_UINT64: ("{}", "_w.UINT64", "uint64"),
    TYPE_INT32: ("_w.as_int32({})", "_w.INT32", "int32"),
    TYPE_UINT32: ("_w.as_uint32({})", "_w.UINT32", "uint32"),
    TYPE_ENUM: ("_w.as_int32({})", "_w.INT32", "enum"),
    TYPE_BOOL: ("{} != 0", "_w.BOOL", "bool"),
}
PY_TYPES = {
    TYPE_INT64: "int",
    TYPE_UINT64: "int",
    TYPE_INT32: "int",
    TYPE_UINT32: "int",
    TYPE_ENUM: "int",
    TYPE_BOOL: "bool",
    TYPE_STRING: "str",
    TYPE_BYTES: "bytes",
}
DEFAULTS = {"int": "0", "bool": "False", "str": '""', "bytes": 'b""'}
RESERVED = {"self", "SerializeToString", "FromString", "_read"}
"""Names a field cannot have: the constructor's ``self`` and the methods every class has."""


class UnsupportedProto(ValueError):
    """A .proto uses something the generated codecs do not implement."""


@dataclass(frozen=True)
class Field:
    name: str
    number: int
    type: int
    repeated: bool
    optional: bool
    message: str | None
    """The Python class of a message field (or of a map entry), else None."""
    map_value: Field | None = None
    """For a map: the entry's value field (its key is always a string or number, field 1)."""
    map_key: Field | None = None

    @property
    def py(self) -> str:
        """The Python type of one value of this field (not of the repeated list)."""
        if self.type == TYPE_MESSAGE:
            assert self.message is not None
            return self.message
        return PY_TYPES[self.type]

    @property
    def annotation(self) -> str:
        if self.map_key is not None and self.map_value is not None:
            return f"dict[{self.map_key.py}, {self.map_value.py}]"
        if self.repeated:
            return f"list[{self.py}]"
        if self.type == TYPE_MESSAGE or self.optional:
            return f"{self.py} | None"
        return self.py

    @property
    def parameter(self) -> str:
        """The constructor parameter: what it accepts and its default."""
        if self.map_key is not None and self.map_value is not None:
            return f"{self.name}: Mapping[{self.map_key.py}, {self.map_value.py}] | None = None"
        if self.repeated:
            return f"{self.name}: Iterable[{self.py}] = ()"
        if self.type == TYPE_MESSAGE or self.optional:
            return f"{self.name}: {self.py} | None = None"
        return f"{self.name}: {self.py} = {DEFAULTS[self.py]}"

    @property
    def initial(self) -> str:
        """The decoder's starting value of this field's local."""
        if self.map_key is not None:
            return "{}"
        if self.repeated:
            return "[]"
        if self.type == TYPE_MESSAGE or self.optional:
            return "None"
        return DEFAULTS[self.py]


@dataclass(frozen=True)
class Message:
    name: str
    """The Python class name (a map entry's is private)."""
    full_name: str
    fields: tuple[Field, ...]


def tag_literal(number: int, wire_type: int) -> str:
    """The tag's varint bytes as a ``b"..."`` literal, e.g. ``b"\\x0a"`` for field 1 length-delimited."""
    value = number << 3 | wire_type
    encoded = bytearray()
    while value >= 0x80:
        encoded.append((value & 0x7F) | 0x80)
        value >>= 7
    encoded.append(value)
    return 'b"' + "".join(f"\\x{b:02x}" for b in encoded) + '"'


def tag_value(number: int, wire_type: int) -> int:
    return number << 3 | wire_type


def _wire_type(field: Field) -> int:
    return 0 if field.type in VARINT_TYPES else 2


# -- reading descriptors -----------------------------------------------------------------------


def _entry_class(message: str, field: str) -> str:
    return f"_{message}{''.join(part.capitalize() for part in field.split('_'))}Entry"


def messages_of(file: Any) -> tuple[list[Message], list[tuple[str, list[tuple[str, int]]]]]:
    """The file's messages (map entries as private classes) and enums, in the order of the file."""
    package = f".{file.package}." if file.package else "."
    top = {m.name for m in file.message_type}
    enums = [(e.name, [(v.name, v.number) for v in e.value]) for e in file.enum_type]
    enum_names = {f"{package}{name}" for name, _ in enums}
    out: list[Message] = []
    for proto in file.message_type:
        entries = {}
        for nested in proto.nested_type:
            if not nested.options.map_entry:
                raise UnsupportedProto(f"{proto.name}.{nested.name}: nested messages are not supported")
            entries[f"{package}{proto.name}.{nested.name}"] = nested
        if proto.enum_type:
            raise UnsupportedProto(f"{proto.name}: nested enums are not supported")
        fields = []
        for field in proto.field:
            if field.HasField("oneof_index") and not field.proto3_optional:
                raise UnsupportedProto(f"{proto.name}.{field.name}: oneofs are not supported")
            if field.name in RESERVED or keyword.iskeyword(field.name):
                raise UnsupportedProto(f"{proto.name}.{field.name}: the name clashes with generated code")
            entry = entries.get(field.type_name)
            if entry is not None:
                key, value = (_field(proto.name, f, package, top, enum_names) for f in entry.field)
                entry_name = _entry_class(proto.name, field.name)
                out.append(Message(entry_name, field.type_name.lstrip("."), (key, value)))
                fields.append(
                    Field(field.name, field.number, TYPE_MESSAGE, True, False, entry_name, value, key)
                )
            else:
                fields.append(_field(proto.name, field, package, top, enum_names))
        out.append(Message(proto.name, f"{file.package}.{proto.name}", tuple(fields)))
    return out, enums


def _field(owner: str, field: Any, package: str, top: set[str], enum_names: set[str]) -> Field:
    repeated = field.label == LABEL_REPEATED
    if field.type == TYPE_MESSAGE:
        name = field.type_name[len(package) :]
        if not field.type_name.startswith(package) or name not in top:
            raise UnsupportedProto(f"{owner}.{field.name}: type {field.type_name} is not in this file")
        return Field(field.name, field.number, TYPE_MESSAGE, repeated, False, name)
    if field.type == TYPE_ENUM and field.type_name not in enum_names:
        raise UnsupportedProto(f"{owner}.{field.name}: enum {field.type_name} is not a top-level one here")
    if field.type not in PY_TYPES:
        raise UnsupportedProto(f"{owner}.{field.name}: field type {field.type} is not supported")
    return Field(field.name, field.number, field.type, repeated, field.proto3_optional, None)


# -- layout ------------------------------------------------------------------------------------


def _call(head: str, args: list[str], tail: str, indent: str) -> list[str]:
    """``head(args)tail`` laid out as ruff format lays out a call or signature that may not fit."""
    one = f"{indent}{head}{', '.join(args)}{tail}"
    if len(one) <= LINE_LENGTH:
        return [one]
    inner = indent + "    "
    joined = f"{inner}{', '.join(args)}"
    if len(joined) <= LINE_LENGTH:
        return [f"{indent}{head}", joined, f"{indent}{tail}"]
    return [f"{indent}{head}", *(f"{inner}{a}," for a in args), f"{indent}{tail}"]


# -- writing -----------------------------------------------------------------------------------


def _encoder(field: Field, target: str, value: str) -> list[str]:
    """Lines appending one value of ``field`` (held in ``value``) to ``target``."""
    wire = _wire_type(field)
    tag = tag_literal(field.number, wire)
    if field.type == TYPE_STRING:
        return [f"_w.put_string({target}, {tag}, {value})"]
    if field.type == TYPE_BYTES:
        return [f"_w.put_bytes({target}, {tag}, {value})"]
    if field.type == TYPE_MESSAGE:
        return [f"_w.put_bytes({target}, {tag}, {value}.SerializeToString())"]
    _, bounds, kind = VARINT_TYPES[field.type]
    return [f'_w.put_int({target}, {tag}, {value}, {bounds}, "{kind}")']


def _write_field(field: Field) -> list[str]:
    attr = f"self.{field.name}"
    if field.map_key is not None:
        return [
            f"for key, value in {attr}.items():",
            f"    entry{field.number} = {field.message}(key=key, value=value)",
            *("    " + line for line in _encoder(field, "out", f"entry{field.number}")),
        ]
    if field.repeated and field.type in VARINT_TYPES:
        _, bounds, kind = VARINT_TYPES[field.type]
        tag = tag_literal(field.number, 2)
        return [f"if {attr}:", f'    _w.put_packed(out, {tag}, {attr}, {bounds}, "{kind}")']
    if field.repeated:
        item = f"item{field.number}"
        return [f"for {item} in {attr}:", *("    " + line for line in _encoder(field, "out", item))]
    test = f"{attr} is not None" if field.type == TYPE_MESSAGE or field.optional else attr
    return [f"if {test}:", *("    " + line for line in _encoder(field, "out", attr))]


def _read_field(field: Field, local: str) -> list[tuple[int, list[str]]]:
    """``(tag, lines)`` for each tag that carries ``field`` (a repeated number has two)."""
    if field.type == TYPE_MESSAGE:
        span = "start, pos = _w.read_length(data, pos, end)"
        if field.map_key is not None:
            assert field.map_value is not None
            entry = f"entry{field.number}"
            value = f"{entry}.value"
            if field.map_value.type == TYPE_MESSAGE:
                value = f"{entry}.value if {entry}.value is not None else {field.map_value.py}()"
            lines = [
                span,
                f"{entry} = {field.message}._read(data, start, pos)",
                f"{local}[{entry}.key] = {value}",
            ]
        elif field.repeated:
            lines = [span, f"{local}.append({field.message}._read(data, start, pos))"]
        else:
            lines = [
                span,
                f"{local}_raw = data[start:pos] if {local}_raw is None else {local}_raw + data[start:pos]",
            ]
        return [(tag_value(field.number, 2), lines)]
    if field.type in (TYPE_STRING, TYPE_BYTES):
        reader = "_w.read_string" if field.type == TYPE_STRING else "_w.read_bytes"
        variable = "text" if field.type == TYPE_STRING else "blob"
        if field.repeated and field.type == TYPE_STRING:
            lines = [f"pos = _w.read_strings(data, pos, end, {tag_value(field.number, 2)}, {local})"]
        elif field.repeated:
            lines = [f"{variable}, pos = {reader}(data, pos, end)", f"{local}.append({variable})"]
        else:
            lines = [f"{local}, pos = {reader}(data, pos, end)"]
        return [(tag_value(field.number, 2), lines)]
    convert = VARINT_TYPES[field.type][0]
    if field.repeated:
        one = [
            "number, pos = _w.read_varint(data, pos, end)",
            f"{local}.append({convert.format('number')})",
        ]
        packed = [
            "numbers, pos = _w.read_packed(data, pos, end)",
            f"{local}.extend({convert.format('n')} for n in numbers)",
        ]
        return [(tag_value(field.number, 0), one), (tag_value(field.number, 2), packed)]
    lines = ["number, pos = _w.read_varint(data, pos, end)", f"{local} = {convert.format('number')}"]
    return [(tag_value(field.number, 0), lines)]


def _constructor(fields: tuple[Field, ...]) -> list[str]:
    params = ["self", *(["*"] if fields else []), *(f.parameter for f in fields)]
    lines = _call("def __init__(", params, ") -> None:", "    ")
    for f in fields:
        if f.map_key is not None:
            value = f"dict({f.name}) if {f.name} is not None else {{}}"
        elif f.repeated:
            value = f"list({f.name})"
        else:
            value = f.name
        lines.append(f"        self.{f.name} = {value}")
    if not fields:
        lines.append("        pass")
    return lines


def _serializer(fields: tuple[Field, ...]) -> list[str]:
    lines = ["    def SerializeToString(self) -> bytes:"]
    if not fields:
        return [*lines, '        return b""']
    lines.append("        out = bytearray()")
    for f in fields:
        lines += ["        " + line for line in _write_field(f)]
    lines.append("        return bytes(out)")
    return lines


def _decoder(name: str, fields: tuple[Field, ...]) -> list[str]:
    """``FromString`` and the ``_read`` it (and an enclosing message's ``_read``) calls."""
    body: list[str] = []
    for f in fields:
        local = f"f{f.number}"
        if f.type == TYPE_MESSAGE and not f.repeated:
            body.append(f"{local}_raw: bytes | None = None")
        else:
            body.append(f"{local}: {f.annotation} = {f.initial}")
    body += [
        "while pos < end:",
        "    tag = data[pos]",
        "    if tag < 0x80:",
        "        pos += 1",
        "    else:",
        "        tag, pos = _w.read_tag(data, pos, end)",
    ]
    first = True
    for f in fields:
        for tag, reads in _read_field(f, f"f{f.number}"):
            body.append(f"    {'if' if first else 'elif'} tag == {tag}:")
            body += ["        " + line for line in reads]
            first = False
    if first:
        body.append("    pos = _w.skip_field(data, tag, pos, end)")
    else:
        body += ["    else:", "        pos = _w.skip_field(data, tag, pos, end)"]
    body.append("decoded = object.__new__(cls)")
    for f in fields:
        local = f"f{f.number}"
        if f.type == TYPE_MESSAGE and not f.repeated:
            body.append(f"decoded.{f.name} = None if {local}_raw is None else {f.py}.FromString({local}_raw)")
        else:
            body.append(f"decoded.{f.name} = {local}")
    body.append("return decoded")
    return [
        "    @classmethod",
        f"    def FromString(cls, data: bytes) -> {name}:",
        '        """Decode ``data``; :class:`~hcs_deviceplugin.api.wireformat.DecodeError` if malformed."""',
        "        return cls._read(data, 0, len(data))",
        "",
        "    @classmethod",
        f"    def _read(cls, data: bytes, pos: int, end: int) -> {name}:",
        *("        " + line for line in body),
    ]


def _class(message: Message) -> list[str]:
    fields = message.fields
    lines = [f"class {message.name}:", f'    """``{message.full_name}``."""', ""]
    if len(fields) == 1:
        lines.append(f'    __slots__ = ("{fields[0].name}",)')
    else:
        lines += _call("__slots__ = (", [f'"{f.name}"' for f in fields], ")", "    ")
    lines.append("")
    lines += [f"    {f.name}: {f.annotation}" for f in fields]
    if fields:
        lines.append("")
    return [
        *lines,
        *_constructor(fields),
        "",
        "    def __eq__(self, other: object) -> bool:",
        "        return _w.same_fields(self, other)",
        "",
        "    def __repr__(self) -> str:",
        "        return _w.fields_repr(self)",
        "",
        *_serializer(fields),
        "",
        *_decoder(message.name, fields),
    ]


def generate_module(file: Any) -> str:
    """The ``api_wire.py`` source for one ``FileDescriptorProto``."""
    messages, enums = messages_of(file)
    source = "proto/" + file.name.split("/", 2)[-1]
    typing_names = []
    if any(f.repeated and f.map_key is None for m in messages for f in m.fields):
        typing_names.append("Iterable")
    if any(f.map_key is not None for m in messages for f in m.fields):
        typing_names.append("Mapping")
    lines = [
        f'"""Plain-Python codecs for the messages of ``{source}``.',
        "",
        f"Package ``{file.package}``.",
        "",
        "Generated by ``python -m hcs_deviceplugin.api.regenerate``: do not edit. Wire-compatible with the",
        "``api_pb2`` module beside it, without the protobuf runtime.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    if typing_names:
        lines.append(f"from collections.abc import {', '.join(typing_names)}")
    if enums:
        lines.append("from typing import Final")
    if typing_names or enums:
        lines.append("")
    lines.append("from hcs_deviceplugin.api import wireformat as _w")
    for enum_name, values in enums:
        lines += ["", f"# enum {enum_name}"]
        lines += [f"{value_name}: Final = {number}" for value_name, number in values]
    for message in messages:
        lines += ["", "", *_class(message)]
    return "\n".join(lines) + "\n"


def generate_all(descriptor_set: bytes) -> dict[str, str]:
    """Proto file name → ``api_wire.py`` source, for every file in a serialized FileDescriptorSet."""
    from google.protobuf import descriptor_pb2  # dev-time: the generated code never imports it

    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file
    return {file.name: generate_module(file) for file in files}
