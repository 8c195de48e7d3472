"""Finding, loading and initialising NVML; options; what the backend does when there is none."""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig, load_factory
from hcs_deviceplugin.model import Unit, replica_unit_id
from tests.nvidia.conftest import Harness
from vendors.nvidia import create_backend
from vendors.nvidia.fake import NODE_ENV, prepare_fake_node
from vendors.nvidia.fake.node import mig_node, pcie_node

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("HCS_NVML_LIB", NODE_ENV)}
    full_env.update(env, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def test_entry_point_names_create_backend() -> None:
    assert load_factory("nvidia") is create_backend


def test_missing_library_is_absent(nvidia: Harness, tmp_path: Path) -> None:
    config = BackendConfig(options={"library": str(tmp_path / "libnvidia-ml.so.1")})
    with pytest.raises(BackendAbsent, match="does not exist"):
        create_backend(config)


def test_unloadable_library_is_absent(nvidia: Harness, tmp_path: Path) -> None:
    bogus = tmp_path / "libnvidia-ml.so.1"
    bogus.write_text("not an ELF file")
    with pytest.raises(BackendAbsent, match="cannot load NVML library"):
        create_backend(BackendConfig(options={"library": str(bogus)}))


def test_init_failure_is_absent_with_the_reason(nvidia: Harness) -> None:
    node = nvidia.node({**pcie_node(1), "init_error": 9})
    with pytest.raises(BackendAbsent, match=r"nvmlInit failed .*Driver Not Loaded"):
        nvidia.backend(node)


def test_library_from_environment(nvidia: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    node = nvidia.node(pcie_node(1))
    monkeypatch.setenv("HCS_NVML_LIB", str(nvidia.lib))
    backend = create_backend(BackendConfig(host_root=node.host_root))
    try:
        assert backend.library == str(nvidia.lib)
        assert len(backend.discover().cards) == 1
    finally:
        backend.close()


def test_another_library_cannot_replace_an_initialised_one(
    nvidia: Harness, fake_lib_without_nvlink: Path
) -> None:
    node = nvidia.node(pcie_node(1))
    nvidia.backend(node)
    with pytest.raises(BackendAbsent, match="cannot switch"):
        nvidia.backend(node, lib=fake_lib_without_nvlink)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"recoverSeconds": "5"}, "unknown nvidia option"),
        ({"recoverySeconds": "soon"}, "must be a number"),
        ({"deviceListStrategy": "files"}, "deviceListStrategy"),
    ],
)
def test_bad_options_fail_loudly(nvidia: Harness, options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_backend(BackendConfig(options={"library": str(nvidia.lib), **options}))


def test_default_search_reports_where_it_looked(tmp_path: Path) -> None:
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("a real NVML is installed here")
    result = _run(
        "from pathlib import Path\n"
        "from hcs_deviceplugin.backend import BackendAbsent, BackendConfig\n"
        "from vendors.nvidia import create_backend\n"
        "try:\n"
        f"    create_backend(BackendConfig(host_root=Path({str(tmp_path)!r})))\n"
        "except BackendAbsent as err:\n"
        "    print(err)\n",
        {},
    )
    assert "NVML library not found; tried libnvidia-ml.so.1 (dynamic loader search)" in result.stdout, (
        result.stderr
    )
    assert f"{tmp_path}/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" in result.stdout


def test_default_search_finds_the_library_under_the_host_root(tmp_path: Path, fake_lib: Path) -> None:
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("a real NVML is installed here")
    libdir = tmp_path / "usr/lib64"
    libdir.mkdir(parents=True)
    shutil.copy(fake_lib, libdir / "libnvidia-ml.so.1")
    node = tmp_path / "node.json"
    node.write_text(json.dumps(pcie_node(2)))
    result = _run(
        "from pathlib import Path\n"
        "from hcs_deviceplugin.backend import BackendConfig\n"
        "from vendors.nvidia import create_backend\n"
        f"backend = create_backend(BackendConfig(host_root=Path({str(tmp_path)!r})))\n"
        "print(backend.library, len(backend.discover().cards))\n",
        {NODE_ENV: str(node)},
    )
    assert result.stdout.split() == [str(libdir / "libnvidia-ml.so.1"), "2"], result.stderr


def test_import_chain_has_no_grpc() -> None:
    result = _run(
        "import sys\n"
        "import vendors.nvidia, vendors.nvidia.tools.probe_real\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google')))\n",
        {},
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_probe_tool_runs_read_only(tmp_path: Path, fake_lib: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps(mig_node()))
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "vendors/nvidia/tools/probe_real.py"),
            "--library",
            str(fake_lib),
            "--host-root",
            str(tmp_path),
            "--health-seconds",
            "0.2",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, NODE_ENV: str(node)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert len(report["inventory"]["cards"]) == 3
    assert len(report["inventory"]["partitions"]) == 11
    assert report["raw_calls"]["nvmlDeviceGetNumaNodeId"]["code"] == 3
    assert len(report["container_edits_card"]) == len(report["container_edits_mig"]) == 7
    assert report["health_thread_stopped"] is True


def test_prepared_fake_node_drives_the_backend(
    tmp_path: Path, fake_build_dir: Path, monkeypatch: pytest.MonkeyPatch, nvidia: Harness
) -> None:
    fake = prepare_fake_node(tmp_path / "e2e", pcie_node(2), build_dir=fake_build_dir)
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    backend = create_backend(BackendConfig(host_root=fake.host_root, options=fake.backend_options))
    try:
        cards = backend.discover().cards
        assert [c.model for c in cards] == ["NVIDIA H100 PCIe"] * 2
        units = [
            Unit(id=replica_unit_id(cards[1].id, r), card_id=cards[1].id, backend="nvidia") for r in range(4)
        ]
        assert dict(backend.container_edits(units).env) == {"NVIDIA_VISIBLE_DEVICES": cards[1].id}
    finally:
        backend.close()
