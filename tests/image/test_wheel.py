"""The image's install steps, without a container engine: build the wheel from exactly what the
Dockerfile's build stage copies, install it into a clean venv, and check the installed tree.

The fast path installs with ``--no-deps`` and borrows the dependencies from the test environment
(read-only, through a ``.pth`` line, after the venv's own site-packages); the slow path installs the
dependencies from the package index as the image does, and runs the daemon's simulation from it.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.image.stages import ROOT, copy_sources, dockerignore_patterns, parse

# Package data the daemon needs at run time, as paths inside site-packages.
PACKAGE_DATA = [
    "hcs_deviceplugin/py.typed",
    "hcs_deviceplugin/api/deviceplugin/v1beta1/api_pb2.pyi",
    "hcs_deviceplugin/api/podresources/v1/api_pb2.pyi",
    "vendors/simulated/default_node.yaml",
    "vendors/nvidia/fake/libnvml_fake.c",
    "vendors/nvidia/fake/nvml_abi.h",
]
WHEEL_SIZE_LIMIT = 1024 * 1024
# The whole daemon and the fake kubelet: what test and bench tooling drives. The core ships them (the
# `run` and `simulate` commands), but nothing in a vendor package may import them: a module there that
# does is a tool (it lives in tools/, outside the wheel), not part of a backend.
TOOLING_MODULES = ("hcs_deviceplugin.daemon", "hcs_deviceplugin.kubeletsim", "hcs_deviceplugin.runner")


def _run(*command: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _stage_build_context(destination: Path) -> Path:
    """The build stage's ``/src``: its COPY sources, less what ``.dockerignore`` leaves out."""
    build = parse()[1][0]
    ignored = [p.removeprefix("**/") for p in dockerignore_patterns() if p.startswith("**/")]
    destination.mkdir()
    for source in copy_sources(build):
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(path, destination / source, ignore=shutil.ignore_patterns(*ignored))
        else:
            shutil.copy2(path, destination / source)
    return destination


@dataclass(frozen=True)
class Installed:
    venv: Path
    site_packages: Path
    workdir: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def script(self) -> Path:
        return self.venv / "bin" / "hcs-deviceplugin"


def _make_venv(path: Path) -> Installed:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    purelib = _run(
        path / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=path
    )
    assert purelib.returncode == 0, purelib.stderr
    workdir = path.parent / f"{path.name}-cwd"
    workdir.mkdir()
    return Installed(path, Path(purelib.stdout.strip()), workdir)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel`` of the build context (the build stage uses the locked build tools; here an isolated
    build fetches them, which makes the same pure-Python wheel)."""
    base = tmp_path_factory.mktemp("wheel")
    source = _stage_build_context(base / "src")
    out = base / "wheels"
    result = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--wheel-dir", out, source, cwd=base
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("hcs_deviceplugin-*.whl")
    print(f"\nwheel {built.name}: {built.stat().st_size} bytes")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """A clean venv with the wheel installed ``--no-deps``; dependencies borrowed from this one."""
    target = _make_venv(tmp_path_factory.mktemp("nodeps") / "venv")
    result = _run(
        target.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=target.workdir
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (target.site_packages / "zz_borrowed_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    yield target


def test_wheel_is_pure_python_and_small(wheel: Path) -> None:
    name, _version, python, abi, platform = wheel.stem.split("-")
    assert (name, python, abi, platform) == ("hcs_deviceplugin", "py3", "none", "any")
    assert 0 < wheel.stat().st_size < WHEEL_SIZE_LIMIT


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert set(PACKAGE_DATA) <= names
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hcs_deviceplugin", "vendors"}
    assert not [n for n in names if n.endswith((".so", ".pyc")) or "__pycache__" in n]
    # Every stub and every fake-library source in the tree made it in.
    for pattern in (
        "hcs_deviceplugin/api/**/*.pyi",
        "vendors/*/fake/*.c",
        "vendors/*/fake/*.h",
        "vendors/**/*.yaml",
    ):
        for path in ROOT.glob(pattern):
            assert path.relative_to(ROOT).as_posix() in names, path


def tooling_imports(sources: dict[str, str]) -> list[str]:
    """``path: module`` for every import of a tooling module in ``sources`` (path → Python text)."""
    found: list[str] = []
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text, filename=path)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            found += [f"{path}: {m}" for m in modules if m.startswith(TOOLING_MODULES)]
    return found


def test_wheel_ships_no_test_tooling(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        vendor_sources = {
            n: archive.read(n).decode() for n in names if n.startswith("vendors/") and n.endswith(".py")
        }
    assert vendor_sources
    assert tooling_imports(vendor_sources) == []
    assert not [n for n in names if n.rsplit("/", 1)[-1].startswith(("test_", "conftest"))]
    assert not [n for n in names if n.startswith(("tools/", "tests/", "bench/"))]


def test_the_tooling_check_catches_a_tool_in_a_vendor_package() -> None:
    """The check can fail: the NVIDIA serving tool, put back under vendors/, is reported."""
    tool = (ROOT / "tools" / "nvidia" / "serve_real.py").read_text()
    found = tooling_imports({"vendors/nvidia/tools/serve_real.py": tool})
    assert "vendors/nvidia/tools/serve_real.py: hcs_deviceplugin.daemon" in found
    assert "vendors/nvidia/tools/serve_real.py: hcs_deviceplugin.kubeletsim" in found


@pytest.mark.parametrize("script", sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("tools/**/*.py")))
def test_tools_run_from_the_checkout(script: str, tmp_path: Path) -> None:
    """Each tool finds the repository from its own path (it is not installed), from any directory."""
    result = _run(sys.executable, ROOT / script, "--help", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_installed_cli_help(installed: Installed) -> None:
    result = _run(installed.script, "--help", cwd=installed.workdir)
    assert result.returncode == 0, result.stderr
    assert "run" in result.stdout
    assert "simulate" in result.stdout
    run_help = _run(installed.script, "run", "--help", cwd=installed.workdir)
    assert run_help.returncode == 0, run_help.stderr
    for option in ("--plugin-dir", "--pools-dir", "--host-root", "--vendors", "--pod-resources-socket"):
        assert option in run_help.stdout


def test_installed_imports_come_from_the_wheel(installed: Installed) -> None:
    code = (
        "import json, importlib.metadata as md, hcs_deviceplugin, vendors.simulated\n"
        "eps = sorted(e.name for e in md.entry_points(group='hcs_deviceplugin.vendors'))\n"
        "print(json.dumps({'core': hcs_deviceplugin.__file__, 'simulated': vendors.simulated.__file__,"
        " 'dist': str(md.distribution('hcs-deviceplugin').locate_file('')), 'vendors': eps}))"
    )
    result = _run(installed.python, "-c", code, cwd=installed.workdir)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    for key in ("core", "simulated", "dist"):
        assert Path(found[key]).resolve().is_relative_to(installed.site_packages.resolve()), found[key]
    assert {"nvidia", "simulated"} <= set(found["vendors"])


def test_installed_package_data(installed: Installed) -> None:
    for relative in PACKAGE_DATA:
        assert (installed.site_packages / relative).is_file(), relative
    assert list((installed.site_packages / "vendors/nvidia/fake").glob("*.c"))


@pytest.mark.slow
def test_full_install_with_dependencies_runs_the_daemon(wheel: Path, tmp_path: Path) -> None:
    """As the runtime stage does: the locked dependencies, hash-checked, then the wheel with --no-deps
    and ``pip check``; nothing borrowed. The lock is resolved for the image's Python 3.12; its hashes
    cover every published file of each pin, so this interpreter finds its own wheels in it.

    Slow (about 45 s: the dependencies are downloaded and installed).
    """
    target = _make_venv(tmp_path / "venv")
    lock = ROOT / "requirements.lock"
    steps = [
        ("install", "-q", "--require-hashes", "-r", lock),
        ("install", "-q", "--no-deps", wheel),
        ("check",),
    ]
    for step in steps:
        result = _run(target.python, "-m", "pip", *step, cwd=target.workdir, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
    version = _run(target.script, "--version", cwd=target.workdir)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == wheel.stem.split("-")[1]
    simulated = _run(
        target.script, "simulate", "--once", "--step-seconds", "0", cwd=target.workdir, timeout=60
    )
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr
    assert "pools registered" in simulated.stdout
