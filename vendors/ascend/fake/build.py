"""Compile the fake ``libdcmi.so`` with the machine's C compiler, cached by source hash.

Tests and ``simulate`` need a real shared object (the backend loads it through ctypes exactly like the
driver's library), but nothing should be compiled twice: the output lives in a folder named after the
hash of the sources, the compiler command and the hidden symbols, and a finished build is reused as is.

``omit`` hides named DCMI symbols with a linker version script, so a test can show how the backend
degrades against a library that lacks a function (ctypes raises AttributeError on lookup), as an older
driver would (ascend.md §1, §7: ccfos/huatuo#870).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

SONAME = "libdcmi.so"
_HERE = Path(__file__).resolve().parent
SOURCES = (_HERE / "libdcmi_fake.c", _HERE / "dcmi_abi.h")
_FLAGS = (
    "-shared",
    "-fPIC",
    "-O1",
    "-g",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-fvisibility=hidden",
    f"-Wl,-soname,{SONAME}",
)
CFLAGS_ENV = "HCS_FAKE_DCMI_CFLAGS"


class FakeBuildError(RuntimeError):
    """The fake library could not be built (no compiler, or the compiler failed)."""


def _compiler() -> str:
    name = os.environ.get("CC", "gcc")
    found = shutil.which(name)
    if found is None:
        raise FakeBuildError(
            f"cannot build the fake libdcmi: C compiler {name!r} not found on PATH "
            "(install gcc, or set CC to a C compiler)"
        )
    return found


def _extra_flags() -> tuple[str, ...]:
    """``$HCS_FAKE_DCMI_CFLAGS``, e.g. ``-fsanitize=thread`` to run the tests under a sanitizer."""
    return tuple(os.environ.get(CFLAGS_ENV, "").split())


def _digest(compiler: str, omit: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for source in SOURCES:
        h.update(source.name.encode())
        h.update(source.read_bytes())
    h.update(" ".join((Path(compiler).name, *_FLAGS, *_extra_flags())).encode())
    h.update(",".join(omit).encode())
    return h.hexdigest()[:16]


def build_fake_dcmi(build_dir: Path, omit: Iterable[str] = ()) -> Path:
    """Path of a built fake ``libdcmi.so`` under ``build_dir``, compiling it if needed.

    Safe to call from several processes at once: each compiles into a temporary file and renames it
    into place, so a reader never sees a half-written library.
    """
    hidden = tuple(sorted(set(omit)))
    compiler = _compiler()
    target_dir = build_dir / f"fake-dcmi-{_digest(compiler, hidden)}"
    target = target_dir / SONAME
    if target.exists():
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_dir) as scratch:
        scratch_dir = Path(scratch)
        cmd = [
            compiler,
            *_FLAGS,
            *_extra_flags(),
            "-o",
            str(scratch_dir / SONAME),
            str(SOURCES[0]),
            "-lpthread",
        ]
        if hidden:
            script = scratch_dir / "exports.map"
            script.write_text("{\n  global: *;\n  local:\n" + "".join(f"    {n};\n" for n in hidden) + "};\n")
            cmd.insert(-1, f"-Wl,--version-script={script}")
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise FakeBuildError(f"compiling the fake libdcmi failed:\n{' '.join(cmd)}\n{result.stderr}")
        os.replace(scratch_dir / SONAME, target)
    return target
