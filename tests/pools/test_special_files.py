"""Special files where a pool file is expected (issue #15, item 4): each is a config error naming the
path and the reason, the object keeps its last good pools, and nothing is read unboundedly.

Before, a FIFO, a directory or a dangling link named ``pools.yaml`` vanished from the listing (or was
read as an empty ConfigMap), which withdrew every pool while ``/readyz`` said 200; a FIFO or
``/dev/zero`` read with ``read_bytes()`` would block or fill memory. The timeout marks catch a read
that blocks. Tests run as root, which reads a mode-000 file: that case runs only as another user.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hcs_deviceplugin.pools.directory import DIRECTORY_PATH, DirectoryPoolSource
from hcs_deviceplugin.pools.errors import FILE_PATH
from hcs_deviceplugin.pools.validate import EXIT_INVALID, main
from tests.pools.hostile import SPECIAL_KINDS, make_special_file, make_special_files, special_applies
from tests.pools.test_input_limits import GOOD_YAML, assert_refused_keeping_good, good_source, ignore, names


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", [k for k in SPECIAL_KINDS if special_applies(k)])
def test_a_special_file_in_place_of_pools_yaml_keeps_the_last_good_pools(tmp_path: Path, kind: str) -> None:
    """Kinds root can read anyway (mode 000) are covered by the forked test below instead."""
    source, path = good_source(tmp_path, "pools.yaml")
    path.unlink()
    reason = make_special_file(path, kind)
    pools, errors = source.reload()
    error = assert_refused_keeping_good(pools, errors, path, reason)
    assert error.path == FILE_PATH


@pytest.mark.timeout(10)
def test_special_files_from_the_start_are_errors_not_an_empty_listing(tmp_path: Path) -> None:
    made = make_special_files(tmp_path)
    (tmp_path / "good.yaml").write_text(GOOD_YAML)
    pools, errors = DirectoryPoolSource(tmp_path, ignore).reload()
    assert names(pools) == ["good"]
    assert sorted((e.source, e.path) for e in errors) == sorted(
        (str(tmp_path / n), FILE_PATH) for n, _ in made
    )
    for name, reason in made:
        (error,) = [e for e in errors if e.source == str(tmp_path / name)]
        assert reason in error.message


@pytest.mark.timeout(10)
def test_a_fifo_key_in_a_configmap_directory_keeps_the_configmap(tmp_path: Path) -> None:
    configmap = tmp_path / "team-a"
    configmap.mkdir()
    (configmap / "pools.yaml").write_text(GOOD_YAML)
    source = DirectoryPoolSource(tmp_path, ignore)
    assert names(source.reload()[0]) == ["good"]
    os.mkfifo(configmap / "more.yaml")
    pools, errors = source.reload()
    assert_refused_keeping_good(pools, errors, configmap / "more.yaml", "it is a FIFO")


def test_a_pools_directory_that_is_a_dangling_link_keeps_every_pool(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "pools.yaml").write_text(GOOD_YAML)
    link = tmp_path / "pools"
    link.symlink_to(real)
    source = DirectoryPoolSource(link, ignore)
    assert names(source.reload()[0]) == ["good"]
    (real / "pools.yaml").unlink()
    real.rmdir()
    pools, errors = source.reload()
    assert names(pools) == ["good"]
    assert [(e.source, e.path) for e in errors] == [(str(link), DIRECTORY_PATH)]
    assert "dangling symlink" in errors[0].message


@pytest.mark.timeout(10)
def test_validate_config_reports_special_files_in_a_directory(tmp_path: Path) -> None:
    made = make_special_files(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert main([str(tmp_path)], out, err) == EXIT_INVALID
    for name, reason in made:
        assert any(
            line.startswith(f"{tmp_path / name}: <file>: ") and reason in line
            for line in out.getvalue().splitlines()
        ), name


UNREADABLE_CHILD = """
import json, os, sys
from pathlib import Path
from tests.pools.test_input_limits import good_source, names
source, path = good_source(Path(sys.argv[1]), "pools.yaml")
path.chmod(0)
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
pools, errors = source.reload()
print(json.dumps({"path": str(path), "pools": names(pools),
                  "errors": [[e.source, e.path, e.message] for e in errors]}))
"""


@pytest.mark.timeout(30)
@pytest.mark.skipif(os.geteuid() != 0, reason="not root: the permission-000 case above runs as it is")
def test_an_unreadable_file_keeps_the_last_good_pools() -> None:
    # Root reads a mode-000 file, so the reload runs in a fresh interpreter that loads the good file as
    # root and then drops to nobody (65534). A fresh process, not os.fork(): forking this process while
    # gRPC threads of earlier tests run can abort the child inside gRPC's fork handlers.
    directory = Path(tempfile.mkdtemp(prefix="hcs-perm-"))  # pytest's tmp_path is root-only (0700)
    try:
        directory.chmod(0o755)
        child = subprocess.run(
            [sys.executable, "-c", UNREADABLE_CHILD, str(directory)],
            capture_output=True,
            text=True,
            timeout=25,
            check=False,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert child.returncode == 0, child.stderr
        report = json.loads(child.stdout)
        assert report == {
            "path": str(directory / "pools.yaml"),
            "pools": ["good"],
            "errors": [[str(directory / "pools.yaml"), FILE_PATH, "cannot read: Permission denied"]],
        }
    finally:
        shutil.rmtree(directory)
