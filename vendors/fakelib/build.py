"""Compile a fake vendor library with the machine's C compiler, cached by source hash.

Tests and ``simulate`` need real shared objects (the backends load them through pynvml or ctypes
exactly like the drivers' libraries), but nothing should be compiled twice: the output lives in a
folder named after the hash of the sources, the compiler command and the hidden symbols, and a
finished build is reused as is. Builds are safe from several processes at once: each compiles into
a temporary file and renames it into place, so a reader never sees a half-written library.

``omit`` hides named symbols with a linker version script, so a test can show how a backend degrades
against a library that lacks a function, as an older driver would.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

INCLUDE_DIR = Path(__file__).resolve().parent
SHARED_HEADERS = (INCLUDE_DIR / "fake_json.h",)
_FLAGS = (
    "-shared",
    "-fPIC",
    "-O1",
    "-g",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-fvisibility=hidden",
)


class FakeBuildError(RuntimeError):
    """The fake library could not be built (no compiler, or the compiler failed)."""


@dataclass(frozen=True)
class FakeLibrary:
    """One fake: its soname, its C file (compiled) and headers (hashed), and its sanitizer env var."""

    soname: str
    source: Path
    headers: Sequence[Path]
    label: str
    cflags_env: str

    def extra_flags(self) -> tuple[str, ...]:
        """``$<cflags_env>``, e.g. ``-fsanitize=address,undefined`` to run the tests under sanitizers."""
        return tuple(os.environ.get(self.cflags_env, "").split())


def _compiler(library: FakeLibrary) -> str:
    name = os.environ.get("CC", "gcc")
    found = shutil.which(name)
    if found is None:
        raise FakeBuildError(
            f"cannot build the fake {library.label}: C compiler {name!r} not found on PATH "
            "(install gcc, or set CC to a C compiler)"
        )
    return found


def _digest(library: FakeLibrary, compiler: str, omit: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for source in (library.source, *library.headers, *SHARED_HEADERS):
        h.update(source.name.encode())
        h.update(source.read_bytes())
    h.update(" ".join((Path(compiler).name, *_FLAGS, *library.extra_flags())).encode())
    h.update(",".join(omit).encode())
    return h.hexdigest()[:16]


def build_shared_library(library: FakeLibrary, build_dir: Path, omit: Iterable[str] = ()) -> Path:
    """Path of the built ``library`` under ``build_dir``, compiling it if needed."""
    hidden = tuple(sorted(set(omit)))
    compiler = _compiler(library)
    target_dir = build_dir / f"fake-{library.label}-{_digest(library, compiler, hidden)}"
    target = target_dir / library.soname
    if target.exists():
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_dir) as scratch:
        scratch_dir = Path(scratch)
        cmd = [
            compiler,
            *_FLAGS,
            f"-Wl,-soname,{library.soname}",
            f"-I{INCLUDE_DIR}",
            *library.extra_flags(),
            "-o",
            str(scratch_dir / library.soname),
            str(library.source),
            "-lpthread",
        ]
        if hidden:
            script = scratch_dir / "exports.map"
            script.write_text("{\n  global: *;\n  local:\n" + "".join(f"    {n};\n" for n in hidden) + "};\n")
            cmd.insert(-1, f"-Wl,--version-script={script}")
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise FakeBuildError(
                f"compiling the fake {library.label} failed:\n{' '.join(cmd)}\n{result.stderr}"
            )
        os.replace(scratch_dir / library.soname, target)
    return target
