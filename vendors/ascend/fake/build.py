"""Build the fake ``libdcmi.so`` (see :mod:`vendors.fakelib.build` for caching and ``omit``).

``omit`` hides named DCMI symbols, so a test can show how the backend degrades against a library that
lacks a function (ctypes raises AttributeError on lookup), as an older driver would (ascend.md §1, §7:
ccfos/huatuo#870). ``$HCS_FAKE_DCMI_CFLAGS`` adds compiler flags, e.g. ``-fsanitize=thread``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vendors.fakelib import FakeBuildError, FakeLibrary, build_shared_library

_HERE = Path(__file__).resolve().parent
LIBRARY = FakeLibrary(
    soname="libdcmi.so",
    source=_HERE / "libdcmi_fake.c",
    headers=(_HERE / "dcmi_abi.h",),
    label="dcmi",
    cflags_env="HCS_FAKE_DCMI_CFLAGS",
)

__all__ = ["LIBRARY", "FakeBuildError", "build_fake_dcmi"]


def build_fake_dcmi(build_dir: Path, omit: Iterable[str] = ()) -> Path:
    """Path of a built fake ``libdcmi.so`` under ``build_dir``, compiling it if needed."""
    return build_shared_library(LIBRARY, build_dir, omit)
