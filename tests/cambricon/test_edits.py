"""ContainerEdits: the card's nodes by host slot, shared nodes that exist, visible devices, cnmon."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount, Unit, replica_unit_id
from tests.cambricon.conftest import Harness
from vendors.cambricon import CambriconBackend
from vendors.cambricon.fake.tree import mlulink_node, pcie_node


def unit(card_id: str, replica: int | None = None) -> Unit:
    unit_id = card_id if replica is None else replica_unit_id(card_id, replica)
    return Unit(unit_id, card_id, "cambricon", replica=replica)


def paths(edits: ContainerEdits) -> list[str]:
    return [d.host_path for d in edits.devices]


def discovered(mlu: Harness, **options: str) -> CambriconBackend:
    backend = mlu.backend(mlu.node(mlulink_node(8)), **options)
    backend.discover()
    return backend


def test_one_card_gets_its_nodes_the_shared_ones_env_and_cnmon(mlu: Harness) -> None:
    edits = discovered(mlu).container_edits([unit("MLU-1916a000-1")])
    assert paths(edits) == [
        "/dev/cambricon_dev1",
        "/dev/cambricon_ipcm1",
        "/dev/commu1",
        "/dev/cambr-msgq:1",
        "/dev/cambr-rpc:1",
        "/dev/cmsg_ctrl1",
        "/dev/cambricon_ctl",
    ]
    assert all(d.container_path == d.host_path and d.permissions == "rw" for d in edits.devices)
    assert dict(edits.env) == {"CAMBRICON_VISIBLE_DEVICES": "1"}
    assert edits.mounts == (Mount("/usr/bin/cnmon", "/usr/bin/cnmon", read_only=True),)


def test_never_mim_caps_consoles_or_split_nodes(mlu: Harness) -> None:
    edits = discovered(mlu).container_edits([unit("MLU-1916a000-0")])
    assert not [p for p in paths(edits) if "caps" in p or "ttyMS" in p or "split" in p]
    assert "/dev/cambricon_dev0" in paths(edits)


def test_slots_are_host_numbers_from_the_class_device(mlu: Harness) -> None:
    edits = discovered(mlu).container_edits([unit("MLU-1916a003-0"), unit("MLU-1916a000-0")])
    assert edits.env["CAMBRICON_VISIBLE_DEVICES"] == "0,7"
    assert paths(edits)[0] == "/dev/cambricon_dev0"
    assert "/dev/cambricon_dev7" in paths(edits) and "/dev/cambricon_dev6" not in paths(edits)


def test_time_slice_replicas_of_one_card_add_it_once(mlu: Harness) -> None:
    edits = discovered(mlu).container_edits([unit("MLU-1916a001-0", 0), unit("MLU-1916a001-0", 3)])
    assert edits.env["CAMBRICON_VISIBLE_DEVICES"] == "2"
    assert paths(edits).count("/dev/cambricon_dev2") == 1


def test_only_nodes_that_exist_on_the_host(mlu: Harness) -> None:
    spec = pcie_node(2)
    node = mlu.node(
        replace(spec, ctl=False, gdr=True, cards=(replace(spec.cards[0], companions=False), spec.cards[1]))
    )
    backend = mlu.backend(node)
    cards = backend.discover().cards
    edits = backend.container_edits([unit(cards[0].id)])
    assert paths(edits) == ["/dev/cambricon_dev0", "/dev/cambricon_gdr"]


def test_cnmon_mount_follows_the_option(mlu: Harness) -> None:
    assert discovered(mlu, cnmonPath="").container_edits([unit("MLU-1916a000-0")]).mounts == ()
    assert discovered(mlu, cnmonPath="/opt/bin/cnmon").container_edits([unit("MLU-1916a000-0")]).mounts == ()


def test_allocate_does_no_io(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(2))
    backend = mlu.backend(node)
    backend.discover()
    before = backend.container_edits([unit("MLU-1916a000-0"), unit("MLU-1916a000-1")])
    shutil.rmtree(node.host_root)
    after = backend.container_edits([unit("MLU-1916a000-0"), unit("MLU-1916a000-1")])
    assert after == before
    assert DeviceNode("/dev/cambricon_dev1", "/dev/cambricon_dev1", "rw") in after.devices


def test_wrong_units_are_errors(mlu: Harness) -> None:
    backend = discovered(mlu)
    assert backend.container_edits([]) == ContainerEdits()
    with pytest.raises(ValueError, match="belongs to backend 'nvidia'"):
        backend.container_edits([Unit("GPU-1", "GPU-1", "nvidia")])
    with pytest.raises(ValueError, match="no known /dev slot"):
        backend.container_edits([unit("MLU-nope")])
    with pytest.raises(ValueError, match="need cndev"):
        backend.container_edits([Unit("p", "MLU-1916a000-0", "cambricon", partition_id="mi1")])


def test_edits_before_discovery_are_an_error(mlu: Harness) -> None:
    backend = mlu.backend(mlu.node(pcie_node(1)))
    with pytest.raises(ValueError, match="before discover"):
        backend.container_edits([unit("MLU-3700b000")])


def test_a_removed_card_keeps_the_nodes_found_while_it_was_well(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(2))
    backend = mlu.backend(node)
    backend.discover()
    before = backend.container_edits([unit("MLU-1916a000-1")])
    node.remove("0000:13:00.0")
    card = backend.discover().card("MLU-1916a000-1")
    assert card is not None and card.health.value == "Unhealthy"
    assert backend.container_edits([unit("MLU-1916a000-1")]) == before
    assert "/dev/cambricon_ipcm1" in paths(before)
