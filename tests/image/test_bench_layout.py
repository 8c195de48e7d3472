"""The start bench's image layout (``bench.installed``): the daemon it times is the installed wheel,
not the checkout, and no editable finder runs in its interpreter; and the floor that says what any
start must import names only modules a start does import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.installed import (
    ROOT,
    Layout,
    dependency_dirs,
    development_layout,
    image_or_development_layout,
    installed_layout,
)
from bench.start_bench import START_MUST_IMPORT

PROBE = """
import json, os, sys
import hcs_deviceplugin, vendors, yaml
print(json.dumps({
    "core": hcs_deviceplugin.__file__,
    "vendors": vendors.__file__,
    "yaml": yaml.__file__,
    "finders": sorted(m for m in sys.modules if m.startswith("__editable__")),
    "path": [os.path.realpath(p or ".") for p in sys.path],
}))
"""


def probe(layout: Layout) -> dict[str, Any]:
    """What ``layout``'s interpreter imports our packages from, with the checkout on ``PYTHONPATH``
    (as ``tools/nvidia/real_round.sh`` sets it) and the checkout as the current directory."""
    env = layout.env({**os.environ, "PYTHONPATH": str(ROOT)})
    result = subprocess.run(
        [layout.python, "-c", PROBE],
        cwd=layout.cwd or ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    found: dict[str, Any] = json.loads(result.stdout)
    return found


@pytest.fixture(scope="module")
def image() -> Iterator[Layout]:
    with installed_layout() as layout:
        yield layout


def test_the_image_layout_runs_the_installed_wheel_without_the_editable_finder(image: Layout) -> None:
    found = probe(image)
    venv = Path(image.python).parents[1]
    for key in ("core", "vendors"):
        assert Path(found[key]).is_relative_to(venv), found[key]
    assert found["finders"] == []
    assert str(ROOT) not in found["path"]
    assert Path(found["yaml"]).exists()  # a dependency, borrowed through the .pth


def test_the_image_layout_starts_from_the_console_script_pip_wrote(image: Layout) -> None:
    (script,) = image.script
    first_line = Path(script).read_text().splitlines()[0]
    assert first_line == f"#!{image.python}"
    env = image.env(os.environ)
    version = subprocess.run([script, "--version"], env=env, capture_output=True, text=True, check=False)
    assert version.returncode == 0, version.stderr
    assert list(
        Path(image.python).parents[1].glob("lib/python*/site-packages/hcs_deviceplugin/__pycache__/*.pyc")
    )


def test_the_probe_sees_the_checkout_and_its_finder_in_the_development_layout() -> None:
    """The same probe can fail: in the editable dev venv our packages come from the checkout."""
    site = Path(sys.executable).parents[1]
    if not list(site.glob("lib/python*/site-packages/__editable__*finder.py")):
        pytest.skip("this interpreter's venv has no editable install")
    found = probe(development_layout())
    assert Path(found["core"]).is_relative_to(ROOT)
    assert found["finders"] != []


def test_where_no_wheel_can_be_built_the_development_layout_stands_in_and_says_why(tmp_path: Path) -> None:
    with image_or_development_layout(tmp_path / "no-checkout") as (layout, note):
        assert layout == development_layout()
        assert "no image layout here: build context:" in note
        assert "pyproject.toml" in note


def test_dependency_dirs_borrow_only_installed_distributions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept: directories with distributions that the venv lacks, once each, in order. Left out: the
    checkout, the script's directory and the current one, the venv's own, a missing one."""

    def directory(name: str, *children: str) -> str:
        path = tmp_path / name
        for child in children:
            (path / child).mkdir(parents=True)
        path.mkdir(exist_ok=True)
        return str(path)

    site = directory("site", "yaml", "PyYAML-6.0.dist-info")
    target = directory("target", "pynvml.py.d", "nvidia_ml_py-13.dist-info")
    checkout = directory("checkout", "hcs_deviceplugin", "vendors", "hcs_deviceplugin.egg-info")
    scripts = directory("scripts", "nvidia")
    stdlib = directory("stdlib", "json", "setuptools-65.dist-info")
    ours = ["", checkout, scripts, target, stdlib, site, target, str(tmp_path / "missing")]
    monkeypatch.chdir(tmp_path)
    assert dependency_dirs(ours, [stdlib]) == [os.path.realpath(target), os.path.realpath(site)]


def test_the_fuller_floor_imports_only_what_a_start_loads() -> None:
    """Every module of ``START_MUST_IMPORT`` is loaded by ``run`` on an NVIDIA node (its command
    line, the run path, the NVIDIA backend), so the floor does not include work a start skips."""
    code = (
        "import json, sys\n"
        "from hcs_deviceplugin import cli, runner\n"
        "from vendors.nvidia import backend\n"
        "cli.build_parser()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    assert [m for m in START_MUST_IMPORT if m not in loaded] == []
