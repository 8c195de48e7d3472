"""Build the fake ``libnvidia-ml.so.1`` (see :mod:`vendors.fakelib.build` for caching and ``omit``).

``omit`` hides named NVML symbols, so a test can show how the backend degrades against a library that
lacks a function (pynvml raises FunctionNotFound), as an older driver would.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vendors.fakelib import FakeBuildError, FakeLibrary, build_shared_library

_HERE = Path(__file__).resolve().parent
LIBRARY = FakeLibrary(
    soname="libnvidia-ml.so.1",
    source=_HERE / "libnvml_fake.c",
    headers=(_HERE / "nvml_abi.h",),
    label="nvml",
    cflags_env="HCS_FAKE_NVML_CFLAGS",
)

__all__ = ["LIBRARY", "FakeBuildError", "build_fake_nvml"]


def build_fake_nvml(out_dir: Path, omit: Iterable[str] = ()) -> Path:
    """Path of a built fake ``libnvidia-ml.so.1`` under ``out_dir``, compiling it if needed."""
    return build_shared_library(LIBRARY, out_dir, omit)
