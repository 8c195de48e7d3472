"""The daemon installed as the image installs it, in a throwaway venv, for timing starts a node pays.

The development venv holds an editable install: its ``__editable__`` finder is a ``.pth`` file that
``site`` runs at every interpreter start, importing pathlib, urllib.parse, ipaddress, importlib.util
and more (about 11 ms of every start on the bench machine) before our first line runs. No node pays
that: the ``Dockerfile`` builds the project's wheel (``pip wheel --no-deps --no-build-isolation``),
installs it with ``pip install --no-deps`` into a plain Python, and runs its ``hcs-deviceplugin``
console script. :func:`installed_layout` does the same, offline: it builds the wheel from what the
image's build stage copies (in a temp dir, so no ``build/`` is left in the checkout to leak stale
modules into a later wheel), creates a venv on this interpreter's base Python without pip, and lets
this interpreter's pip install the wheel into it (``--python``), which writes the console script and
the ``.pyc`` files as it does in the image.

The dependencies are borrowed, not installed (that needs the network): one path-only ``.pth`` in the
venv's site-packages lists the directories on this interpreter's ``sys.path`` that hold installed
distributions (a venv's site-packages, a ``pip --target`` dir on ``PYTHONPATH``), less those the venv
has of its own and any that holds our own packages (the checkout). A directory named in a ``.pth``
is only appended to ``sys.path``; its own ``.pth`` files, the editable finder among them, are not
run. ``PYTHONPATH`` is unset for the layout's processes, so the checkout cannot come first either.
What still differs from the image: those directories hold more distributions than the image has
(the development tools), whose ``entry_points.txt`` the start reads too: under a millisecond here
for some 45 of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_CONTEXT = ("pyproject.toml", "README.md", "hcs_deviceplugin", "vendors")
"""What the Dockerfile's build stage copies to build the wheel (the locks aside)."""
NOT_COPIED = ("__pycache__", "*.pyc", "*.so", "*.egg-info", "build", "dist")
"""What ``.dockerignore`` keeps out of those directories."""
OUR_PACKAGES = ("hcs_deviceplugin", "vendors")
UNSET = ("PYTHONPATH", "PYTHONHOME")
"""Variables that would put the checkout (or another Python) before the installed wheel."""
BORROWED_PTH = "zz_borrowed_dependencies.pth"


class LayoutError(RuntimeError):
    """The installed layout could not be built here (no build tools, a pip without ``--python``)."""


@dataclass(frozen=True)
class Layout:
    """One way of starting the daemon and a bare interpreter: the image's, or the checkout's."""

    label: str
    script: tuple[str, ...]
    """The argv that runs ``hcs-deviceplugin``."""
    python: str
    """The interpreter the script runs on, for floors measured the same way."""
    cwd: Path | None = None
    """Where ``python -c`` runs, so that its ``sys.path[0]`` (the current directory) is not the checkout."""
    unset: tuple[str, ...] = ()

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` without the variables this layout must not see."""
        return {k: v for k, v in base.items() if k not in self.unset}


def development_layout() -> Layout:
    """``hcs-deviceplugin`` next to this interpreter if installed there (editable, as README's setup
    installs it, or not), else ``python -m hcs_deviceplugin`` from the checkout."""
    script = Path(sys.executable).parent / "hcs-deviceplugin"
    if not script.exists():
        return Layout("checkout, python -m", (sys.executable, "-m", "hcs_deviceplugin"), sys.executable)
    editable = any(Path(sysconfig.get_paths()["purelib"]).glob("__editable__*hcs_deviceplugin*.pth"))
    return Layout("editable dev venv" if editable else "dev venv", (str(script),), sys.executable)


@contextmanager
def installed_layout(repo: Path = ROOT) -> Iterator[Layout]:
    """The wheel of ``repo`` installed in a throwaway venv, removed on exit; LayoutError if impossible."""
    work = Path(tempfile.mkdtemp(prefix="hcsl", dir="/tmp"))
    try:
        yield build_layout(repo, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_layout(repo: Path, work: Path) -> Layout:
    """Build the wheel, the venv and the borrowed-dependencies ``.pth`` under the empty dir ``work``."""
    wheel = build_wheel(repo, work)
    target = work / "venv"
    try:
        venv.create(target, with_pip=False, symlinks=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise LayoutError(f"venv: {error}") from error
    python = target / "bin" / "python"
    _pip("install", "-q", "--no-deps", "--no-index", str(wheel), python=python)
    script = (str(target / "bin" / "hcs-deviceplugin"),)
    layout = Layout("image layout", script, str(python), cwd=work, unset=UNSET)
    paths = "import json, sys, sysconfig; print(json.dumps([sysconfig.get_paths()['purelib'], sys.path]))"
    site_packages, own_path = json.loads(_probe(layout, paths))
    borrowed = dependency_dirs(sys.path, own_path)
    (Path(site_packages) / BORROWED_PTH).write_text("".join(f"{d}\n" for d in borrowed))
    return layout


def build_wheel(repo: Path, work: Path) -> Path:
    """``pip wheel --no-deps --no-build-isolation`` of a copy of the image's build context."""
    source = work / "src"
    source.mkdir()
    try:
        for name in BUILD_CONTEXT:
            path = repo / name
            if path.is_dir():
                shutil.copytree(path, source / name, ignore=shutil.ignore_patterns(*NOT_COPIED))
            else:
                shutil.copy2(path, source / name)
    except OSError as error:
        raise LayoutError(f"build context: {error}") from error
    out = work / "wheel"
    _pip(
        "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", str(out), str(source)
    )
    wheels = list(out.glob("hcs_deviceplugin-*.whl"))
    if len(wheels) != 1:
        raise LayoutError(f"pip wheel made {[w.name for w in wheels]} in {out}")
    return wheels[0]


def dependency_dirs(ours: Sequence[str], theirs: Sequence[str]) -> list[str]:
    """The directories on our ``sys.path`` (``ours``) that hold installed distributions and that the
    venv's (``theirs``) lacks, in order; never one that would serve our own packages from outside the
    wheel (the checkout), nor the script's or current directory that ``sys.path`` starts with."""
    have = {os.path.realpath(p) for p in theirs if p}
    found: list[str] = []
    for entry in ours:
        path = os.path.realpath(entry or ".")
        if path in have or path in found or not os.path.isdir(path):
            continue
        names = os.listdir(path)
        if any(package in names for package in OUR_PACKAGES):
            continue
        if any(name.endswith((".dist-info", ".egg-info")) for name in names):
            found.append(path)
    return found


def _probe(layout: Layout, code: str) -> str:
    result = subprocess.run(
        [layout.python, "-c", code],
        cwd=layout.cwd,
        env=layout.env(os.environ),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise LayoutError(f"{layout.python} -c: {result.stderr.strip()}")
    return result.stdout


def _pip(*args: str, python: Path | None = None) -> None:
    """This interpreter's pip, offline; on ``python`` if given (``--python``, pip 22.3 or later), and
    then without ``PYTHONPATH``, so that pip sees what the venv holds, not the checkout. A build keeps
    it: the build tools may be importable only through it."""
    target = ("--python", str(python)) if python else ()
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pip", *target, *args],
        env={k: v for k, v in env.items() if not (python and k in UNSET)},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise LayoutError(f"pip {args[0]}: {(result.stderr or result.stdout).strip()[-2000:]}")


@contextmanager
def image_or_development_layout(repo: Path = ROOT) -> Iterator[tuple[Layout, str]]:
    """The installed layout if it can be built here, else :func:`development_layout`; with a line
    that says which, and why not the image's (a GPU machine may lack the build tools or a recent pip)."""
    work = Path(tempfile.mkdtemp(prefix="hcsl", dir="/tmp"))
    try:
        try:
            layout = build_layout(repo, work)
            note = f"{layout.label}: the wheel installed in a throwaway venv, as the image does"
        except LayoutError as error:
            layout = development_layout()
            reason = str(error).strip().splitlines()[-1:] or [type(error).__name__]
            note = f"{layout.label} ({' '.join(layout.script)}); no image layout here: {reason[0]}"
        yield layout, note
    finally:
        shutil.rmtree(work, ignore_errors=True)
