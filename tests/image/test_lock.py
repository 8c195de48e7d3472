"""requirements.lock: every runtime dependency of pyproject.toml, pinned within its range, with hashes,
resolved for the Python the image runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.image.stages import ROOT, parse

LOCK = ROOT / "requirements.lock"
BUILD_LOCK = ROOT / "requirements-build.lock"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?: ;.*)?$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def parse_lock(text: str) -> dict[str, tuple[Version, list[str]]]:
    """Canonical name → (pinned version, hashes). Fails on a line that is not a hashed exact pin."""
    entries: dict[str, tuple[Version, list[str]]] = {}
    logical = re.sub(r"\\\n", " ", text)
    for raw in logical.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        requirement, *hashes = line.split()
        match = PIN.match(requirement)
        assert match, f"not an exact pin: {line!r}"
        assert hashes and all(HASH.match(h) for h in hashes), f"no sha256 hashes: {line!r}"
        name = canonicalize_name(match["name"])
        assert name not in entries, f"{name} pinned twice"
        entries[name] = (Version(match["version"]), hashes)
    return entries


def uncovered(dependencies: list[str], lock: dict[str, tuple[Version, list[str]]]) -> list[str]:
    """Dependencies the lock lacks, or pins outside the declared range."""
    problems: list[str] = []
    for text in dependencies:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name not in lock:
            problems.append(f"{requirement.name}: not locked")
        elif not requirement.specifier.contains(lock[name][0], prereleases=True):
            problems.append(f"{requirement.name}: {lock[name][0]} outside {requirement.specifier}")
    return problems


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _dependencies() -> list[str]:
    deps: list[str] = _pyproject()["project"]["dependencies"]
    return deps


def test_lock_pins_every_runtime_dependency_within_its_range() -> None:
    lock = parse_lock(LOCK.read_text())
    assert uncovered(_dependencies(), lock) == []
    assert canonicalize_name("hcs-deviceplugin") not in lock, "the project's own wheel is built, not locked"


def test_build_lock_pins_the_build_system() -> None:
    requires: list[str] = _pyproject()["build-system"]["requires"]
    assert uncovered(requires, parse_lock(BUILD_LOCK.read_text())) == []


@pytest.mark.parametrize("lock", [LOCK, BUILD_LOCK], ids=lambda p: p.name)
def test_locks_are_resolved_for_the_image_python(lock: Path) -> None:
    base = parse()[0]["PYTHON_IMAGE"]
    match = re.match(r"python:(\d+\.\d+)-", base)
    assert match, base
    assert f"--python-version {match[1]}" in lock.read_text(), "regenerate the lock for the image's Python"


@pytest.mark.parametrize(
    ("lock", "problem"),
    [
        ("grpcio==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n", "grpcio: 1.0 outside >=1.85.1"),
        ("", "PyYAML: not locked"),
    ],
)
def test_the_coverage_check_can_fail(lock: str, problem: str) -> None:
    assert problem in uncovered(["grpcio>=1.85.1", "PyYAML>=6.0"], parse_lock(lock))


@pytest.mark.parametrize(
    "bad",
    ["grpcio>=1.85 \\\n    --hash=sha256:" + "0" * 64, "grpcio==1.85.3", "grpcio==1.85.3 --hash=md5:00"],
)
def test_unhashed_or_ranged_lines_are_refused(bad: str) -> None:
    with pytest.raises(AssertionError):
        parse_lock(bad)
