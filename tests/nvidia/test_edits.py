"""Allocate answers for every device-list and device-ID strategy, as NVIDIA's plugin gives them (§3.3-3.6)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hcs_deviceplugin.model import (
    ContainerEdits,
    DeviceNode,
    Inventory,
    Mount,
    Partition,
    Unit,
    replica_unit_id,
)
from tests.nvidia.conftest import Harness
from vendors.nvidia import NvidiaBackend
from vendors.nvidia.edits import parse_edit_options
from vendors.nvidia.fake.node import mig_minor, mig_node


@dataclass
class Node:
    backend: NvidiaBackend
    inventory: Inventory

    def card_units(self, *indices: int, replicas: int = 1) -> list[Unit]:
        units = []
        for i in indices:
            card = self.inventory.cards[i]
            for r in range(replicas):
                unit_id = replica_unit_id(card.id, r) if replicas > 1 else card.id
                units.append(
                    Unit(id=unit_id, card_id=card.id, backend="nvidia", replica=r if replicas > 1 else None)
                )
        return units

    def mig_units(self, *parts: Partition) -> list[Unit]:
        return [Unit(id=p.id, card_id=p.card_id, backend="nvidia", partition_id=p.id) for p in parts]

    def edits(self, units: list[Unit], **options: str) -> ContainerEdits:
        return self.backend.container_edits(units, options)


@pytest.fixture
def node(nvidia: Harness) -> Iterator[Node]:
    backend = nvidia.backend(nvidia.node(mig_node()))
    yield Node(backend, backend.discover())


CTL = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


def _nodes(*paths: str) -> tuple[DeviceNode, ...]:
    return tuple(DeviceNode(p, p, "rw") for p in paths)


def test_envvar_by_uuid_with_device_specs_is_the_default(node: Node) -> None:
    """passDeviceSpecs defaults to true (DKP sets it; GPUs then survive a systemd daemon-reload)."""
    cards = node.inventory.cards
    edits = node.edits(node.card_units(0, 2))
    assert edits == ContainerEdits(
        env={"NVIDIA_VISIBLE_DEVICES": f"{cards[0].id},{cards[2].id}"},
        devices=_nodes(*CTL, "/dev/nvidia0", "/dev/nvidia2"),
    )


def test_envvar_by_index(node: Node) -> None:
    edits = node.edits(node.card_units(2, 0), deviceIDStrategy="index")
    assert dict(edits.env) == {"NVIDIA_VISIBLE_DEVICES": "2,0"}


def test_replicas_of_one_card_list_it_once(node: Node) -> None:
    units = node.card_units(0, 2, replicas=4)
    assert len(units) == 8
    edits = node.edits(units, deviceIDStrategy="index")
    assert dict(edits.env) == {"NVIDIA_VISIBLE_DEVICES": "0,2"}


def test_volume_mounts(node: Node) -> None:
    uuid = node.inventory.cards[1].id
    edits = node.edits(node.card_units(1), deviceListStrategy="volume-mounts")
    assert dict(edits.env) == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
    assert edits.mounts == (Mount(f"/var/run/nvidia-container-devices/{uuid}", "/dev/null", read_only=False),)
    assert edits.devices == _nodes(*CTL, "/dev/nvidia1")


def test_cdi_annotations(node: Node) -> None:
    cards = node.inventory.cards
    edits = node.edits(node.card_units(0, 1), deviceListStrategy="cdi-annotations")
    assert dict(edits.env) == {}
    ((key, value),) = edits.annotations.items()
    assert key.startswith("cdi.k8s.io/nvidia-device-plugin_")
    assert len(key.split("/", 1)[1]) <= 63
    assert value == f"nvidia.com/gpu={cards[0].id},nvidia.com/gpu={cards[1].id}"
    again = node.edits(node.card_units(0, 1), deviceListStrategy="cdi-annotations")
    assert again == edits  # pure: the same request gives the same answer


def test_cdi_cri_with_index_and_custom_kind(node: Node) -> None:
    edits = node.edits(
        node.card_units(2),
        deviceListStrategy="cdi-cri",
        deviceIDStrategy="index",
        cdiKind="k8s.device-plugin.nvidia.com/gpu",
    )
    assert edits == ContainerEdits(cdi_devices=("k8s.device-plugin.nvidia.com/gpu=2",))


def test_cdi_only_strategies_carry_no_device_specs(node: Node) -> None:
    edits = node.edits(
        node.card_units(0), deviceListStrategy="cdi-cri,cdi-annotations", passDeviceSpecs="true"
    )
    assert (dict(edits.env), edits.mounts, edits.devices) == ({}, (), ())
    assert edits.cdi_devices and edits.annotations


def test_several_strategies_at_once(node: Node) -> None:
    uuid = node.inventory.cards[0].id
    edits = node.edits(node.card_units(0), deviceListStrategy="envvar, cdi-cri")
    assert dict(edits.env) == {"NVIDIA_VISIBLE_DEVICES": uuid}
    assert edits.cdi_devices == (f"nvidia.com/gpu={uuid}",)
    listed = node.edits(node.card_units(0), deviceListStrategy="[envvar, volume-mounts]")
    assert dict(listed.env) == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}  # as upstream
    assert len(listed.mounts) == 1


def test_pass_device_specs(node: Node) -> None:
    assert node.edits(node.card_units(0, 2), passDeviceSpecs="false").devices == ()
    edits = node.edits(node.card_units(0, 2), passDeviceSpecs="true")
    assert edits.devices == _nodes(*CTL, "/dev/nvidia0", "/dev/nvidia2")


def test_dev_root_prefixes_host_paths(node: Node) -> None:
    edits = node.edits(node.card_units(2), passDeviceSpecs="true", devRoot="/run/nvidia/driver")
    assert edits.devices[-1] == DeviceNode("/dev/nvidia2", "/run/nvidia/driver/dev/nvidia2", "rw")


def test_mig_devices_by_uuid_and_index(node: Node) -> None:
    mixed = [p for p in node.inventory.partitions if p.card_id == node.inventory.cards[0].id]
    single = [p for p in node.inventory.partitions if p.card_id == node.inventory.cards[1].id]
    units = node.mig_units(mixed[3], single[5])
    assert dict(node.edits(units).env) == {"NVIDIA_VISIBLE_DEVICES": f"{mixed[3].id},{single[5].id}"}
    assert dict(node.edits(units, deviceIDStrategy="index").env) == {"NVIDIA_VISIBLE_DEVICES": "0:3,1:5"}
    assert node.edits(units, deviceListStrategy="cdi-cri").cdi_devices == (
        f"nvidia.com/gpu={mixed[3].id}",
        f"nvidia.com/gpu={single[5].id}",
    )


def test_mig_device_specs_include_parent_and_caps(node: Node) -> None:
    part = [p for p in node.inventory.partitions if p.card_id == node.inventory.cards[0].id][3]
    gi = int(part.attributes["gpuInstanceId"])
    edits = node.edits(node.mig_units(part), passDeviceSpecs="true")
    assert edits.devices == _nodes(
        *CTL,
        "/dev/nvidia0",
        f"/dev/nvidia-caps/nvidia-cap{mig_minor(0, gi)}",
        f"/dev/nvidia-caps/nvidia-cap{mig_minor(0, gi, 0)}",
    )


def test_replicas_of_one_mig_device_list_it_once(node: Node) -> None:
    part = node.inventory.partitions[0]
    units = [
        Unit(
            id=replica_unit_id(part.id, r),
            card_id=part.card_id,
            backend="nvidia",
            partition_id=part.id,
            replica=r,
        )
        for r in range(3)
    ]
    assert dict(node.edits(units).env) == {"NVIDIA_VISIBLE_DEVICES": part.id}


def test_unknown_device_is_an_error(node: Node) -> None:
    with pytest.raises(ValueError, match="unknown NVIDIA device"):
        node.edits([Unit(id="GPU-nope", card_id="GPU-nope", backend="nvidia")])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deviceListStrategy": "envvar,bogus"}, "deviceListStrategy"),
        ({"deviceListStrategy": ""}, "deviceListStrategy"),
        ({"deviceIDStrategy": "serial"}, "deviceIDStrategy"),
        ({"passDeviceSpecs": "maybe"}, "passDeviceSpecs"),
        ({"migStrategy": "some"}, "migStrategy"),
    ],
)
def test_bad_options_are_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_edit_options(options)


def test_unknown_pool_options_are_ignored() -> None:
    assert vars(parse_edit_options({"resourcePrefix": "gpu.deckhouse.io", "migStrategy": "mixed"})) == vars(
        parse_edit_options({})
    )


def test_backend_defaults_are_overridden_by_pool_options(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()), deviceIDStrategy="index", passDeviceSpecs="true")
    card = backend.discover().cards[2]
    units = [Unit(id=card.id, card_id=card.id, backend="nvidia")]
    default = backend.container_edits(units)
    assert dict(default.env) == {"NVIDIA_VISIBLE_DEVICES": "2"}
    assert default.devices[-1].container_path == "/dev/nvidia2"
    pool = backend.container_edits(units, {"deviceIDStrategy": "uuid", "passDeviceSpecs": "false"})
    assert pool == ContainerEdits(env={"NVIDIA_VISIBLE_DEVICES": card.id})


def test_edits_never_call_nvml_before_discovery(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(mig_node()))  # created, not yet discovered
    unit = Unit(id="GPU-x", card_id="GPU-x", backend="nvidia")
    with pytest.raises(ValueError, match="before discover"):
        backend.container_edits([unit])
