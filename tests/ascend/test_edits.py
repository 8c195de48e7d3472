"""Allocate answers for chips and vNPUs (§4): device nodes, ASCEND_VISIBLE_DEVICES, runtime mode, mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcs_deviceplugin.model import Card, DeviceNode, Inventory, Mount, Partition, Unit, replica_unit_id
from tests.ascend.backend_harness import Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend import AscendBackend
from vendors.ascend.backend import host_facts
from vendors.ascend.edits import EditOptions, HostFacts, container_edits
from vendors.ascend.fake import FakeAscendNode, node_310p_duo, node_910b

CONTROL = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
DRIVER = ("/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi")


def _nodes(*paths: str) -> tuple[DeviceNode, ...]:
    return tuple(DeviceNode(p, p, "rw") for p in paths)


def _card_units(cards: list[Card] | tuple[Card, ...], replicas: int = 1) -> list[Unit]:
    units = []
    for card in cards:
        for r in range(replicas):
            uid = replica_unit_id(card.id, r) if replicas > 1 else card.id
            units.append(Unit(id=uid, card_id=card.id, backend="ascend", replica=r if replicas > 1 else None))
    return units


def _vnpu_units(parts: list[Partition]) -> list[Unit]:
    return [Unit(id=p.id, card_id=p.card_id, backend="ascend", partition_id=p.id) for p in parts]


def _with_driver(node: FakeAscendNode) -> FakeAscendNode:
    for path in DRIVER[:2]:
        (node.host_root / path.lstrip("/")).mkdir(parents=True)
    return node


def test_chips_get_their_davinci_nodes_control_nodes_and_driver_mounts(ascend: Harness) -> None:
    backend = ascend.backend(_with_driver(ascend.node(node_910b(8))))
    cards = backend.discover().cards
    edits = backend.container_edits(_card_units([cards[5], cards[2]]))
    assert dict(edits.env) == {
        "ASCEND_VISIBLE_DEVICES": "2,5",
        "ASCEND_RT_VISIBLE_DEVICES": "0,1",
        "ASCEND_RUNTIME_OPTIONS": "",
    }
    assert edits.devices == _nodes("/dev/davinci2", "/dev/davinci5", *CONTROL)
    assert edits.mounts == tuple(Mount(p, p, read_only=True) for p in DRIVER[:2]), "npu-smi is absent"


def test_replicas_of_one_chip_count_once(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(2)))
    cards = backend.discover().cards
    edits = backend.container_edits(_card_units([cards[1]], replicas=3))
    assert edits.env["ASCEND_VISIBLE_DEVICES"] == "1"
    assert edits.env["ASCEND_RT_VISIBLE_DEVICES"] == "0", "the one chip is logical device 0 inside"
    assert edits.devices[0] == DeviceNode("/dev/davinci1", "/dev/davinci1", "rw")


def test_310p_duo_adds_the_dvpp_node(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_310p_duo(2)))
    cards = backend.discover().cards
    edits = backend.container_edits(_card_units(cards[2:]))
    assert edits.env["ASCEND_VISIBLE_DEVICES"] == "2,3"
    assert edits.devices == _nodes("/dev/davinci2", "/dev/davinci3", *CONTROL, "/dev/dvpp_cmdlist")


def test_vnpus_map_vdavinci_and_say_virtual(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_310p_duo(1)))
    chip = backend.discover().cards[1]
    parts = backend.partition(chip, "vir04", 2)
    edits = backend.container_edits(_vnpu_units(parts[1:]))
    vdev = parts[1].attributes["vdevId"]
    assert dict(edits.env) == {
        "ASCEND_VISIBLE_DEVICES": vdev,
        "ASCEND_RT_VISIBLE_DEVICES": "0",
        "ASCEND_RUNTIME_OPTIONS": "VIRTUAL",
    }
    assert edits.devices[0] == DeviceNode(f"/dev/davinci{vdev}", f"/dev/vdavinci{vdev}", "rw")
    assert edits.devices[1:] == _nodes(*CONTROL, "/dev/dvpp_cmdlist")


@pytest.mark.parametrize("where", ["backend", "pool"])
def test_ascend_docker_mode_is_env_only(ascend: Harness, where: str) -> None:
    node = _with_driver(ascend.node(node_910b(2)))
    backend: AscendBackend
    if where == "backend":
        backend = ascend.backend(node, useAscendDocker="true")
        pool_options: dict[str, str] = {}
    else:
        backend = ascend.backend(node)
        pool_options = {"useAscendDocker": "true"}
    cards = backend.discover().cards
    edits = backend.container_edits(_card_units(cards), pool_options)
    assert dict(edits.env) == {
        "ASCEND_VISIBLE_DEVICES": "0,1",
        "ASCEND_RT_VISIBLE_DEVICES": "0,1",
        "ASCEND_RUNTIME_OPTIONS": "",
    }
    assert edits.devices == () and edits.mounts == ()


def test_driver_mounts_option(ascend: Harness) -> None:
    node = _with_driver(ascend.node(node_910b(1)))
    (node.host_root / "etc").mkdir()
    (node.host_root / "etc/ascend_install.info").write_text("Driver_Install_Path_Param=/usr/local/Ascend\n")
    backend = ascend.backend(node, driverMounts="/etc/ascend_install.info, /opt/missing")
    cards = backend.discover().cards
    assert backend.container_edits(_card_units(cards)).mounts == (
        Mount("/etc/ascend_install.info", "/etc/ascend_install.info", read_only=True),
    )
    none = ascend.backend(node, driverMounts="")
    none.discover()
    assert none.container_edits(_card_units(cards)).mounts == ()


def test_missing_control_nodes_are_not_passed(ascend: Harness) -> None:
    node = ascend.node(node_910b(1))
    (node.host_root / "dev/hisi_hdc").unlink()
    backend = ascend.backend(node)
    edits = backend.container_edits(_card_units(backend.discover().cards))
    assert edits.devices == _nodes("/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm")


def test_edits_before_discovery_and_unknown_units_are_errors(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1)))
    unit = Unit(id="nope", card_id="nope", backend="ascend")
    with pytest.raises(ValueError, match="before discover"):
        backend.container_edits([unit])
    backend.discover()
    with pytest.raises(ValueError, match="unknown Ascend device 'nope'"):
        backend.container_edits([unit])


def _soc_card() -> Card:
    return Card(
        id="soc",
        backend="ascend",
        vendor="huawei",
        model="Ascend310B4",
        index=0,
        attributes={"phyId": "0", "family": "Ascend310B"},
    )


def test_310b_allows_links_and_uses_the_docker_manager_node() -> None:
    host = HostFacts(
        control_devices=(("/dev/davinci_manager_docker", "/dev/davinci_manager"), ("/dev/venc", "/dev/venc"))
    )
    edits = container_edits(_card_units([_soc_card()]), {"soc": _soc_card()}, {}, host, EditOptions())
    assert edits.env["ASCEND_ALLOW_LINK"] == "True"
    assert edits.devices[1:] == (
        DeviceNode("/dev/davinci_manager", "/dev/davinci_manager_docker", "rw"),
        DeviceNode("/dev/venc", "/dev/venc", "rw"),
    )


def test_chips_and_vnpus_cannot_share_a_container() -> None:
    card = _soc_card()
    part = Partition(id="v", card_id="soc", profile="vir01", attributes={"vdevId": "100"})
    units = [*_card_units([card]), *_vnpu_units([part])]
    with pytest.raises(ValueError, match="whole chips and vNPUs together"):
        container_edits(units, {"soc": card}, {"v": part}, HostFacts(), EditOptions())


def test_no_units_no_edits() -> None:
    assert container_edits([], {}, {}, HostFacts(), EditOptions()).env == {}


def test_host_facts_of_a_310b_node(tmp_path: Path) -> None:
    for name in ("davinci_manager", "davinci_manager_docker", "devmm_svm", "hisi_hdc", "pngd", "venc"):
        (tmp_path / "dev").mkdir(exist_ok=True)
        (tmp_path / "dev" / name).touch()
    facts = host_facts(tmp_path, Inventory(cards=(_soc_card(),)), DRIVER)
    assert facts.control_devices == (
        ("/dev/devmm_svm", "/dev/devmm_svm"),
        ("/dev/hisi_hdc", "/dev/hisi_hdc"),
        ("/dev/davinci_manager_docker", "/dev/davinci_manager"),
        ("/dev/pngd", "/dev/pngd"),
        ("/dev/venc", "/dev/venc"),
    )
    assert facts.driver_mounts == ()
