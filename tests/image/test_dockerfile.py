"""The Dockerfile: a build stage that makes wheels, a slim runtime stage that installs them, offline."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from hcs_deviceplugin.cli import build_parser
from tests.image.stages import DOCKERFILE, ROOT, Stage, copy_sources, dockerignore_patterns, parse

# Anything that compiles or installs a toolchain.
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|cc|clang|make|cmake|build-essential|python3?-dev|libc6?-dev|apt-get|apt|apk|yum|dnf)\b"
)


def build_tool_runs(stage: Stage) -> list[str]:
    """The RUN instructions of ``stage`` that mention a compiler or a package manager."""
    return [r.original for r in stage.of("RUN") if BUILD_TOOLS.search(" ".join(r.value))]


def _stages() -> list[Stage]:
    return parse()[1]


def _runtime() -> Stage:
    return _stages()[-1]


def test_two_stages_on_a_slim_python() -> None:
    stages = _stages()
    assert len(stages) == 2
    assert [s.name for s in stages] == ["build", "runtime"]
    for stage in stages:
        assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?@sha256:[0-9a-f]{64}", stage.base), stage.base
    assert stages[0].base == stages[1].base, "the wheels are built for the interpreter that runs them"


def test_base_image_is_pinned_by_digest_and_overridable() -> None:
    global_args, stages = parse()
    assert re.fullmatch(r"python:3\.12-slim-bookworm@sha256:[0-9a-f]{64}", global_args["PYTHON_IMAGE"])
    froms = [i for i in dockerfile_lines() if i.startswith("FROM ")]
    assert froms == ["FROM ${PYTHON_IMAGE} AS build", "FROM ${PYTHON_IMAGE} AS runtime"]
    assert [s.base for s in stages] == [global_args["PYTHON_IMAGE"]] * 2


def dockerfile_lines() -> list[str]:
    return [line.strip() for line in DOCKERFILE.read_text().splitlines()]


def _shell(stage: Stage) -> list[str]:
    """The RUN commands of ``stage``, one string each."""
    return [" ".join(r.value) for r in stage.of("RUN")]


def test_dependencies_are_exactly_the_locked_files() -> None:
    """The build stage downloads only what requirements.lock pins, hash-checked; the runtime stage
    installs those with hashes again, and the project's wheel alone, with no dependency of its own."""
    build, runtime = _stages()
    assert {"requirements.lock", "requirements-build.lock"} <= set(copy_sources(build))
    (prepare,) = [c for c in _shell(build) if "pip wheel" in c]
    build_steps = [step.strip() for step in prepare.split("&&")]
    tools = "python -m pip install --require-hashes -r requirements-build.lock"
    assert build_steps[0] == tools, "the build tools are the locked ones, installed first"
    (wheel,) = [s for s in build_steps if "pip wheel" in s]
    assert "--no-build-isolation" in wheel, "an isolated build would fetch unpinned build tools"
    (download,) = [c for c in _shell(build) if "pip download" in c]
    assert re.search(r"pip download --require-hashes --only-binary=:all: .*-r requirements\.lock", download)
    assert "cp requirements.lock /wheels/" in download
    (install,) = [c for c in _shell(runtime) if "pip install" in c]
    steps = [step.strip() for step in install.split("&&")]
    locked = [s for s in steps if "-r /wheels/requirements.lock" in s]
    assert len(locked) == 1
    assert "--require-hashes" in locked[0]
    assert "--no-index" in locked[0]
    project = [s for s in steps if "hcs_deviceplugin-" in s]
    assert project == ["python -m pip install --no-index --no-deps /wheels/hcs_deviceplugin-*.whl"]
    assert steps.index(locked[0]) < steps.index(project[0])
    assert "python -m pip check" in steps, "the locked versions must satisfy the project's ranges"
    assert not [s for s in _shell(build) if "pip wheel" in s and "--no-deps" not in s], (
        "only the project is built; its dependencies come from the lock"
    )


OCI_LABELS = {"title", "description", "licenses", "version", "revision", "created", "source", "base.name"}


def test_oci_labels() -> None:
    runtime = _runtime()
    labels: dict[str, str] = {}
    for label in runtime.of("LABEL"):
        pairs = zip(label.value[::2], label.value[1::2], strict=True)
        labels.update((key, value.strip('"')) for key, value in pairs)
    prefix = "org.opencontainers.image."
    assert {k.removeprefix(prefix) for k in labels if k.startswith(prefix)} >= OCI_LABELS
    args = dict(a.value[0].partition("=")[::2] for a in runtime.of("ARG"))
    assert labels[prefix + "base.name"] == "${PYTHON_IMAGE}"
    assert "PYTHON_IMAGE" in args, "the global ARG must be declared again in the stage to be used"
    assert labels[prefix + "version"] == "${VERSION}"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert args["VERSION"] == version, "the image's version label follows pyproject.toml"
    assert labels[prefix + "licenses"] == "Apache-2.0"


def test_build_stage_makes_wheels() -> None:
    build = _stages()[0]
    runs = " ".join(" ".join(r.value) for r in build.of("RUN"))
    assert re.search(r"pip wheel .*--wheel-dir /wheels|-m build", runs), runs


def test_build_stage_copies_what_the_wheel_needs() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(copy_sources(_stages()[0]))
    assert {"pyproject.toml", pyproject["project"]["readme"]} | packages <= copied


def test_dockerignore_keeps_the_build_inputs() -> None:
    patterns = dockerignore_patterns()
    for source in copy_sources(_stages()[0]):
        assert not any(fnmatch.fnmatch(source, p) for p in patterns), source
    for excluded in (".git", ".venv", "tests", "tools"):
        assert excluded in patterns


def test_runtime_stage_has_no_build_tools_and_no_source() -> None:
    runtime = _runtime()
    assert build_tool_runs(runtime) == []
    assert copy_sources(runtime) == [], "the runtime stage takes nothing from the build context"
    assert not runtime.of("ADD")


def test_runtime_installs_the_wheel_offline_from_the_build_stage() -> None:
    runtime = _runtime()
    installs = [r for r in runtime.of("RUN") if "pip install" in " ".join(r.value)]
    assert len(installs) == 1
    install = installs[0]
    command = " ".join(install.value)
    assert "--no-index" in command
    assert "--find-links=/wheels" in command
    assert "hcs-deviceplugin" in command
    mounts = [f for f in install.flags if f.startswith("--mount=")]
    copies = [c for c in runtime.of("COPY") if "--from=build" in c.flags]
    assert mounts or copies, "the wheels must come from the build stage"
    for mount in mounts:
        options = dict(o.split("=", 1) for o in mount.removeprefix("--mount=").split(","))
        assert options == {"type": "bind", "from": "build", "source": "/wheels", "target": "/wheels"}


def test_entrypoint_runs_the_daemon() -> None:
    runtime = _runtime()
    (entrypoint,) = runtime.of("ENTRYPOINT")
    (cmd,) = runtime.of("CMD")
    assert entrypoint.json and cmd.json, "exec form, so SIGTERM reaches the daemon"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint.value == ("hcs-deviceplugin",)
    assert scripts["hcs-deviceplugin"] == "hcs_deviceplugin.__main__:main"
    assert cmd.value == ("run",)
    assert build_parser().parse_args(list(cmd.value)).command == "run"


def test_image_user_is_non_root_and_the_chart_opts_into_root() -> None:
    """The image defaults to an unprivileged uid; the chart, which knows why, asks for uid 0."""
    runtime = _runtime()
    users = runtime.of("USER")
    assert len(users) == 1
    install = next(i for i in runtime.instructions if i.cmd == "RUN" and "pip install" in " ".join(i.value))
    assert runtime.instructions.index(users[0]) > runtime.instructions.index(install), "install as root first"
    uid, _, gid = users[0].value[0].partition(":")
    assert uid.isdigit(), "numeric, so kubelet can check runAsNonRoot against it"
    assert int(uid) != 0
    assert gid.isdigit()
    assert int(gid) != 0
    from tests.chart.chart import container

    assert container()["securityContext"]["runAsUser"] == 0


def test_the_checks_catch_a_fat_runtime_stage(tmp_path: Path) -> None:
    """The same checks, on a Dockerfile that gets it wrong: one stage, a compiler, source copied in."""
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        "FROM python:3.12-slim\n"
        "RUN apt-get update && apt-get install -y gcc\n"
        "COPY . /src\n"
        "RUN pip install /src\n"
        'ENTRYPOINT ["hcs-deviceplugin"]\n'
    )
    (stage,) = parse(bad)[1]
    assert len(build_tool_runs(stage)) == 1
    assert copy_sources(stage) == ["."]
    assert not stage.of("USER")


@pytest.mark.parametrize("variable", ["PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"])
def test_runtime_environment(variable: str) -> None:
    envs = [dict(zip(e.value[::2], e.value[1::2], strict=True)) for e in _runtime().of("ENV")]
    assert any(env.get(variable) == "1" for env in envs)
