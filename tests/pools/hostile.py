"""Hostile pool files: documents and special files that a pool source must refuse cheaply.

Shared by the pool tests (``tests/pools/test_input_limits.py``, ``test_special_files.py``), the
``hostile_pools`` bench and black-box reliability tests of the daemon, so the interface is kept
stable:

* :func:`hostile_documents` yields ``(name, content)``: a file name (``<kind>-<nnn>.yaml`` or
  ``.json``; the suffix says how the daemon reads it) and its bytes. Deterministic (seeded), at
  least 1,000 with the default ``variants``; most are small, a few are 10 MB.
* :func:`expected_reason` gives, for a name, a fragment the daemon's error message contains.
* :data:`SPECIAL_KINDS`, :func:`make_special_file` and :func:`make_special_files` put non-regular
  things where a pool file is expected (FIFO, directory, dangling link, link to ``/dev/zero``...).

Every document is refused: none of them is a valid pool document, so "kept the last good pools"
can be checked after each one. Write a document with ``write_atomically`` (or any rename) so a
watcher never sees it half-written.
"""

from __future__ import annotations

import os
import random
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

DEFAULT_VARIANTS = 60
"""Variants per kind by default: 19 kinds x 60 = 1,140 documents."""

MIB = 1024 * 1024
GOOD_HEADER = "version: v1\npools:\n"


def _alias_bomb(i: int, rng: random.Random) -> str:
    width, levels = 5 + i % 6, 6 + i % 5
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


def _merge_bomb(i: int, rng: random.Random) -> str:
    levels = 8 + i % 12
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4}"]
    for level in range(1, levels + 1):
        lines.append(f"m{level}: &m{level}")
        for j in range(4):
            lines.append(f"  k{j}: {{<<: *m{level - 1}}}")
    return "\n".join(lines) + "\n"


def _aliased_pools(i: int, rng: random.Random) -> str:
    # Valid once expanded: only the alias check refuses it.
    return (
        GOOD_HEADER + f"- name: a{i}\n  devices: &d{i} [{{uuid: GPU-{i}}}]\n- name: b{i}\n  devices: *d{i}\n"
    )


def _merge_inline(i: int, rng: random.Random) -> str:
    return GOOD_HEADER + f"- <<: {{name: m{i}, unit: Card}}\n  slicesPerUnit: {1 + i % 4}\n"


def _deep_flow(i: int, rng: random.Random) -> str:
    depth = 33 + i * 1_000
    return "[" * depth + "]" * depth


def _deep_block_lists(i: int, rng: random.Random) -> str:
    depth = 33 + i
    return "".join("  " * n + "-\n" for n in range(depth)) + "  " * depth + "x\n"


def _deep_block_maps(i: int, rng: random.Random) -> str:
    depth = 33 + i
    return "".join("  " * n + f"k{n}:\n" for n in range(depth)) + "  " * depth + "x\n"


def _lists_100_deep(i: int, rng: random.Random) -> str:
    # What an independent checker used: a megabyte of lines of lists nested 100 deep.
    line = "- " * (100 + i) + "x\n"
    return line * (MIB // len(line) - 1)


def _many_nodes(i: int, rng: random.Random) -> str:
    return "[" + ",".join(["0"] * (100_001 + i * 1_000)) + "]\n"


def _oversize(i: int, rng: random.Random) -> str:
    size = 10_000_000 if i % 10 == 0 else MIB + 1 + i * 1_001
    return "#" * size


def _binary(i: int, rng: random.Random) -> bytes:
    data = bytearray(rng.randbytes(64 + i * 997))
    data[i % len(data)] = 0xFF  # never valid UTF-8
    return bytes(data)


def _control_chars(i: int, rng: random.Random) -> str:
    return GOOD_HEADER + f"- name: c{i}\n  unit: Card\x00\x01\x02{chr(0x7F)}\n"


def _huge_int(i: int, rng: random.Random) -> str:
    return GOOD_HEADER + f"- name: h{i}\n  slicesPerUnit: {'9' * (100 + i * 5_000)}\n"


def _huge_int_json(i: int, rng: random.Random) -> str:
    return '{"version": "v1", "pools": [{"name": "j", "slicesPerUnit": ' + "7" * (5_000 + i * 3_000) + "}]}"


def _deep_json(i: int, rng: random.Random) -> str:
    depth = 33 + i * 500
    return "[" * depth + "]" * depth


def _long_key(i: int, rng: random.Random) -> str:
    return "version: v1\n? " + "k" * (10_000 + i * 10_000) + "\n: 1\n"


def _many_pools(i: int, rng: random.Random) -> str:
    count = 500 + i * 50
    return GOOD_HEADER + "".join(f"- {{name: p{n}, unit: Cardd}}\n" for n in range(count))


def _many_device_entries(i: int, rng: random.Random) -> str:
    count = 500 + i * 50
    entries = "".join(f"  - uuid: GPU-{n % (count // 2):08d}\n" for n in range(count))
    return GOOD_HEADER + f"- name: d{i}\n  devices:\n" + entries


def _python_tag(i: int, rng: random.Random) -> str:
    return GOOD_HEADER + f"- !!python/object/apply:os.system ['echo {i}']\n"


def _multi_document(i: int, rng: random.Random) -> str:
    return (GOOD_HEADER + f"- name: x{i}\n---\n") * (2 + i)


def _syntax_late(i: int, rng: random.Random) -> str:
    body = "".join(f"- name: s{n}\n" for n in range(100 + i * 300))
    return GOOD_HEADER + body + "- name: [unclosed\n"


_Maker = Callable[[int, random.Random], "str | bytes"]

# kind -> (file suffix, maker, fragment of the error message)
_KINDS: dict[str, tuple[str, _Maker, str]] = {
    "alias-bomb": (".yaml", _alias_bomb, "anchors, aliases and merge keys"),
    "merge-bomb": (".yaml", _merge_bomb, "anchors, aliases and merge keys"),
    "aliased-pools": (".yaml", _aliased_pools, "anchor &d"),
    "merge-inline": (".yaml", _merge_inline, "merge key <<"),
    "deep-flow": (".yaml", _deep_flow, "nested too deeply"),
    "deep-block-lists": (".yaml", _deep_block_lists, "nested too deeply"),
    "deep-block-maps": (".yaml", _deep_block_maps, "nested too deeply"),
    "lists-100-deep": (".yaml", _lists_100_deep, "nested too deeply"),
    "many-nodes": (".yaml", _many_nodes, "more than 100000 values"),
    "oversize": (".yaml", _oversize, "too large"),
    "binary": (".yaml", _binary, "not UTF-8"),
    "control-chars": (".yaml", _control_chars, "invalid YAML"),
    "huge-int": (".yaml", _huge_int, "too long"),
    "huge-int-json": (".json", _huge_int_json, "digits"),
    "deep-json": (".json", _deep_json, "nested too deeply"),
    "long-key": (".yaml", _long_key, "unknown key"),
    "many-pools": (".yaml", _many_pools, "more errors not shown"),
    "many-device-entries": (".yaml", _many_device_entries, "names the same card"),
    "python-tag": (".yaml", _python_tag, "could not determine a constructor"),
    "multi-document": (".yaml", _multi_document, "expected a single document"),
    "syntax-late": (".yaml", _syntax_late, "invalid YAML"),
}

KINDS: tuple[str, ...] = tuple(_KINDS)
"""Every kind of hostile document, in the order :func:`hostile_documents` yields them."""


def kind_of(name: str) -> str:
    """The kind of a document name from :func:`hostile_documents` (``alias-bomb-007.yaml``)."""
    return name.rsplit("-", 1)[0]


def expected_reason(name: str) -> str:
    """A fragment of the error message the daemon gives for the document called ``name``."""
    return _KINDS[kind_of(name)][2]


def hostile_document(kind: str, variant: int = 0) -> tuple[str, bytes]:
    """One document: ``(name, content)`` of ``kind``, variant ``variant`` (0 is the smallest)."""
    suffix, make, _ = _KINDS[kind]
    content = make(variant, random.Random(f"{kind}/{variant}"))
    data = content if isinstance(content, bytes) else content.encode("utf-8")
    return f"{kind}-{variant:03d}{suffix}", data


def hostile_documents(variants: int = DEFAULT_VARIANTS) -> Iterator[tuple[str, bytes]]:
    """``variants`` documents of every kind (default: over 1,000 in all), generated lazily."""
    for kind in KINDS:
        for variant in range(variants):
            yield hostile_document(kind, variant)


def write_atomically(path: Path, content: bytes) -> None:
    """Replace ``path`` with ``content`` in one rename, as kubelet and editors do."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _dangling(path: Path) -> None:
    path.symlink_to(path.with_name("..gone-" + path.name))


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _dev_null(path: Path) -> None:
    path.symlink_to("/dev/null")


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
    finally:
        sock.close()  # the socket file stays


def _sparse_10g(path: Path) -> None:
    with path.open("wb") as out:
        out.truncate(10 * 1024**3)


def _no_permission(path: Path) -> None:
    path.write_text(GOOD_HEADER + "- name: hidden\n")
    path.chmod(0)


# kind -> (maker, fragment of the error message, whether root sees the problem too)
_SPECIAL: dict[str, tuple[Callable[[Path], None], str, bool]] = {
    "fifo": (_fifo, "not a regular file: it is a FIFO", True),
    "directory": (_directory, "not a regular file: it is a directory", True),
    "dangling-symlink": (_dangling, "is a dangling symlink", True),
    "symlink-to-dev-zero": (_dev_zero, "it is a character device (through a symlink to '/dev/zero')", True),
    "symlink-to-dev-null": (_dev_null, "it is a character device", True),
    "symlink-loop": (_loop, "cannot read: Too many levels of symbolic links", True),
    "socket": (_socket, "not a regular file: it is a socket", True),
    "sparse-10g": (_sparse_10g, "too large", True),
    "permission-000": (_no_permission, "cannot read: Permission denied", False),
}

SPECIAL_KINDS: tuple[str, ...] = tuple(_SPECIAL)
"""Every kind of special file :func:`make_special_file` makes."""


def special_reason(kind: str) -> str:
    """A fragment of the error message the daemon gives for a special file of ``kind``."""
    return _SPECIAL[kind][1]


def special_applies(kind: str) -> bool:
    """Whether a special file of ``kind`` is a problem for this process (root reads mode 000 files)."""
    return _SPECIAL[kind][2] or os.geteuid() != 0


def make_special_file(path: Path, kind: str) -> str:
    """Put a special file of ``kind`` at ``path`` (which must not exist); returns the reason fragment."""
    maker, reason, _ = _SPECIAL[kind]
    maker(path)
    return reason


def make_special_files(directory: Path) -> list[tuple[str, str]]:
    """One special file of every kind that is a problem for this process (:func:`special_applies`)
    in ``directory``, named ``<kind>.yaml``; returns ``(name, reason)`` of each."""
    made = []
    for kind in SPECIAL_KINDS:
        if special_applies(kind):
            name = f"{kind}.yaml"
            made.append((name, make_special_file(directory / name, kind)))
    return made


def is_special(path: Path) -> bool:
    """Whether ``path`` is anything but a regular file (for cleaning up between cases)."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False
