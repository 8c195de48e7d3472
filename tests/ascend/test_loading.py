"""Finding and loading libdcmi like a real node: paths, dcmi_init, missing symbols, absent libraries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig, load_backends, load_factory
from tests.ascend.backend_harness import FAST, Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend import create_backend
from vendors.ascend.fake import node_910b, node_a3
from vendors.ascend.library import INSTALL_PATHS, LIBRARY_ENV

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_library_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LIBRARY_ENV, raising=False)


def test_entry_point_names_create_backend() -> None:
    assert load_factory("ascend") is create_backend


def test_library_path_that_does_not_exist_is_absent(tmp_path: Path) -> None:
    missing = tmp_path / "libdcmi.so"
    with pytest.raises(BackendAbsent, match=rf"libdcmi.so not found; tried {missing} \(does not exist\)"):
        create_backend(BackendConfig(options={"libraryPath": str(missing)}))


def test_default_search_tries_the_install_paths_under_the_host_root(tmp_path: Path) -> None:
    with pytest.raises(BackendAbsent) as caught:
        create_backend(BackendConfig(host_root=tmp_path))
    for relative in INSTALL_PATHS:
        assert f"{tmp_path / relative} (does not exist)" in str(caught.value)


def test_default_search_finds_the_second_install_path(ascend: Harness, tmp_path: Path) -> None:
    node = ascend.node(node_910b(2))
    installed = tmp_path / "root" / INSTALL_PATHS[1]
    installed.parent.mkdir(parents=True)
    shutil.copy(node.lib_path, installed)
    backend = create_backend(BackendConfig(host_root=tmp_path / "root"))
    try:
        assert backend.library.path == str(installed)
        assert len(backend.discover().cards) == 2
    finally:
        backend.close()


def test_library_from_the_environment(ascend: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    node = ascend.node(node_910b(1))
    monkeypatch.setenv(LIBRARY_ENV, str(node.lib_path))
    backend = create_backend(BackendConfig(host_root=node.host_root))
    try:
        assert backend.library.path == str(node.lib_path)
        assert len(backend.discover().cards) == 1
    finally:
        backend.close()


def test_a_file_that_is_no_library_is_absent(tmp_path: Path) -> None:
    bogus = tmp_path / "libdcmi.so"
    bogus.write_text("not an ELF file")
    with pytest.raises(BackendAbsent, match="cannot load libdcmi"):
        create_backend(BackendConfig(options={"libraryPath": str(bogus)}))


def test_failing_dcmi_init_is_absent_with_the_code(ascend: Harness) -> None:
    node = ascend.node({**node_910b(2), "init_error": -8005})
    with pytest.raises(BackendAbsent, match=r"dcmi_init failed with .*-8005 \(ERR_CODE_INNER_ERR\)"):
        ascend.backend(node)


def test_ownership_check_refuses_a_library_root_does_not_own(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    with pytest.raises(BackendAbsent, match="fails the ownership check"):
        ascend.backend(node, checkOwnership="true")
    assert len(ascend.backend(node, checkOwnership="false").discover().cards) == 1


def test_missing_symbol_degrades_one_feature_and_says_which(ascend: Harness) -> None:
    node = ascend.node(node_910b(2), omit=("dcmi_get_device_die_v2",))
    backend = ascend.backend(node)
    assert backend.degraded == ["missing symbol dcmi_get_device_die_v2: chip identity (VDIE id) unavailable"]
    cards = backend.discover().cards
    assert [c.id for c in cards] == ["ascend-pci-0000:c1:00.0", "ascend-pci-0000:c2:00.0"]
    assert {c.attributes["identity"] for c in cards} == {"pci"}
    assert {c.model for c in cards} == {"Ascend910B3"}, "everything else is still read"


def test_missing_topology_symbol_falls_back_to_the_family_rules(ascend: Harness) -> None:
    node = ascend.node(node_a3(2), omit=("dcmi_get_topo_info_by_device_id",))
    backend = ascend.backend(node)
    assert (
        "missing symbol dcmi_get_topo_info_by_device_id: HCCS topology query unavailable" in backend.degraded
    )
    inventory = backend.discover()
    dies = [c.id for c in inventory.cards]
    assert inventory.links.between(dies[0], dies[1])[0].count == 2, "SIO inside a module"
    assert inventory.links.between(dies[0], dies[2])[0].count == 1, "HCCS between modules"


def test_only_the_v1_card_list_is_enough(ascend: Harness) -> None:
    node = ascend.node(node_910b(2), omit=("dcmi_get_card_list",))
    assert len(ascend.backend(node).discover().cards) == 2


@pytest.mark.parametrize(
    ("omit", "message"),
    [
        (("dcmi_init",), "has no dcmi_init symbol"),
        (("dcmi_get_card_list", "dcmi_get_card_num_list"), "has neither dcmi_get_card_list nor"),
    ],
)
def test_indispensable_symbols_missing_is_absent(
    ascend: Harness, omit: tuple[str, ...], message: str
) -> None:
    node = ascend.node(node_910b(1), omit=omit)
    with pytest.raises(BackendAbsent, match=message):
        ascend.backend(node)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"libraryPat": "x"}, "unknown ascend option"),
        ({"callTimeoutSeconds": "0"}, "must be above 0"),
        ({"healthIntervalSeconds": "soon"}, "must be a number"),
        ({"ignoredFaultCodes": "0x1,oops"}, "not a number"),
        ({"driverMounts": "usr/local/dcmi"}, "must be absolute"),
        ({"useAscendDocker": "maybe"}, "true or false"),
    ],
)
def test_bad_options_fail_loudly(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_backend(BackendConfig(options=options))


def test_daemon_goes_on_without_the_library(tmp_path: Path) -> None:
    def config_for(name: str) -> BackendConfig:
        if name == "ascend":
            return BackendConfig(host_root=tmp_path)
        return BackendConfig(options={"node": "builtin:default"})

    loaded = load_backends(["ascend", "simulated"], config_for)
    assert list(loaded.running) == ["simulated"]
    assert "libdcmi.so not found" in loaded.absent["ascend"]


def test_two_backends_in_one_process_each_initialise_their_node(ascend: Harness) -> None:
    first = ascend.backend(ascend.node(node_910b(2)), FAST)
    assert len(first.discover().cards) == 2
    second = ascend.backend(ascend.node(node_a3(1)), FAST)
    assert [c.attributes["family"] for c in second.discover().cards] == ["Ascend910A3"] * 2


def test_import_chain_has_no_grpc() -> None:
    env = {k: v for k, v in os.environ.items() if k != LIBRARY_ENV}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vendors.ascend\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google')))",
        ],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip() == "[]", result.stderr
