"""ContainerEdits: device nodes by the card's own minors, ordinals in the visible-devices variables, hyhal."""

from __future__ import annotations

import shutil

import pytest

from hcs_deviceplugin.model import DeviceNode, Mount, Unit, replica_unit_id
from tests.hygon.conftest import Harness
from vendors.hygon.fake import pcie_node, xgmi_node


def unit(card_id: str, replica: int | None = None, backend: str = "hygon") -> Unit:
    unit_id = card_id if replica is None else replica_unit_id(card_id, replica)
    return Unit(id=unit_id, card_id=card_id, backend=backend, replica=replica)


def test_one_card(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(8))
    backend = hygon.backend(node)
    card = backend.discover().cards[5]
    edits = backend.container_edits([unit(card.id)])

    assert edits.devices == (
        DeviceNode("/dev/kfd", "/dev/kfd", "rw"),
        DeviceNode("/dev/mkfd", "/dev/mkfd", "rw"),
        DeviceNode("/dev/dri/card6", "/dev/dri/card6", "rw"),
        DeviceNode("/dev/dri/renderD133", "/dev/dri/renderD133", "rw"),
    ), "host paths are the real /dev paths, never prefixed with the host root"
    assert dict(edits.env) == {
        "HIP_VISIBLE_DEVICES": "0",
        "ROCR_VISIBLE_DEVICES": "0",
        "HYHAL_PATH": "/opt/hyhal",
    }, "container ordinals: the runtime sees only the render nodes injected"
    assert edits.mounts == (Mount("/opt/hyhal", "/opt/hyhal", read_only=True),)


def test_replicas_of_one_card_count_once(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(pcie_node(4)))
    cards = [c.id for c in backend.discover().cards]
    edits = backend.container_edits([unit(cards[2], 0), unit(cards[2], 3), unit(cards[0], 1)])
    assert [d.container_path for d in edits.devices] == [
        "/dev/kfd",
        "/dev/mkfd",
        "/dev/dri/card3",
        "/dev/dri/renderD130",
        "/dev/dri/card1",
        "/dev/dri/renderD128",
    ]
    assert edits.env["HIP_VISIBLE_DEVICES"] == "0,1"


def test_shared_nodes_and_hyhal_only_where_they_exist(hygon: Harness) -> None:
    node = hygon.node(pcie_node(1))
    (node.host_root / "dev/mkfd").unlink()
    shutil.rmtree(node.host_root / "opt/hyhal")
    backend = hygon.backend(node)
    card = backend.discover().cards[0].id
    edits = backend.container_edits([unit(card)])
    assert [d.container_path for d in edits.devices] == ["/dev/kfd", "/dev/dri/card1", "/dev/dri/renderD128"]
    assert edits.mounts == () and "HYHAL_PATH" not in edits.env


def test_hyhal_path_option(hygon: Harness) -> None:
    node = hygon.node(pcie_node(1))
    (node.host_root / "usr/local/hyhal").mkdir(parents=True)
    custom = hygon.backend(node, {"hyhalPath": "/usr/local/hyhal"})
    card = custom.discover().cards[0].id
    assert custom.container_edits([unit(card)]).mounts == (Mount("/usr/local/hyhal", "/usr/local/hyhal"),)
    disabled = hygon.backend(node, {"hyhalPath": ""})
    disabled.discover()
    assert disabled.container_edits([unit(card)]).mounts == ()


def test_edits_do_no_io(hygon: Harness) -> None:
    node = hygon.node(pcie_node(2))
    backend = hygon.backend(node)
    cards = [c.id for c in backend.discover().cards]
    before = backend.container_edits([unit(c) for c in cards])
    shutil.rmtree(node.host_root)
    assert backend.container_edits([unit(c) for c in cards]) == before


def test_units_it_cannot_serve_are_errors(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(pcie_node(1)))
    with pytest.raises(ValueError, match="before discover"):
        backend.container_edits([unit("DCU-x")])
    card = backend.discover().cards[0].id
    with pytest.raises(ValueError, match="does not have"):
        backend.container_edits([unit("DCU-missing")])
    with pytest.raises(ValueError, match="belongs to backend 'nvidia'"):
        backend.container_edits([unit(card, backend="nvidia")])
    with pytest.raises(ValueError, match="partition"):
        backend.container_edits([Unit(id="p", card_id=card, backend="hygon", partition_id="p")])
    assert backend.container_edits([]).devices == ()
