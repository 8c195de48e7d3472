"""Discovery through the real pynvml against the fake: cards, MIG devices, links, and how it degrades."""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from pathlib import Path
from typing import cast

import pytest

from hcs_deviceplugin.model import Health, Inventory, Link, LinkKind, inventory_id
from tests.nvidia.conftest import Harness
from tests.waiting import WAIT
from vendors.nvidia.fake.node import (
    CALL_LOG_ENV,
    DGX_BUSES,
    H100_MEMORY,
    dgx_h100_node,
    gpu_uuid,
    mig_minor,
    mig_node,
    pcie_node,
)
from vendors.nvidia.hostfs import cap_path, parse_mig_minors
from vendors.nvidia.topology import normalise_bus_id


def test_dgx_node_cards(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(dgx_h100_node()))
    inventory = backend.discover()

    assert [c.id for c in inventory.cards] == [gpu_uuid("dgx", i) for i in range(8)]
    assert [c.pci_address for c in inventory.cards] == [f"0000:{bus:02x}:00.0" for bus in DGX_BUSES]
    assert [c.numa_node for c in inventory.cards] == [0, 0, 0, 0, 1, 1, 1, 1]  # from NVML memory affinity
    first = inventory.cards[0]
    assert (first.backend, first.vendor, first.model, first.index) == (
        "nvidia",
        "nvidia",
        "NVIDIA H100 80GB HBM3",
        0,
    )
    assert (first.pci_vendor_id, first.pci_device_id, first.memory_bytes) == (0x10DE, 0x2330, H100_MEMORY)
    assert first.health == Health.HEALTHY
    assert inventory_id("k8s-w1.gpu.example.ru", first) == "k8s-w1-gpu-example-ru-0-10de-2330"
    assert dict(first.attributes) == {
        "minor": "0",
        "index": "0",
        "busId": "00000000:18:00.0",
        "migMode": "disabled",
        "controlDevices": "/dev/nvidiactl,/dev/nvidia-uvm,/dev/nvidia-uvm-tools",
        "driverVersion": "580.159.04",
        "computeCapability": "9.0",
    }
    assert inventory.partitions == ()


def test_dgx_nvswitch_links_all_to_all(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(dgx_h100_node("switch")))
    inventory = backend.discover()
    ids = [c.id for c in inventory.cards]
    for a, b in itertools.combinations(range(8), 2):
        links = inventory.links.between(ids[a], ids[b])
        assert links[0] == Link(LinkKind.NVLINK, count=18, bandwidth_gbps=450.0), (a, b)
        expected = (
            LinkKind.PCIE_SWITCH
            if a // 2 == b // 2
            else LinkKind.SAME_NUMA
            if a // 4 == b // 4
            else LinkKind.CROSS_SOCKET
        )
        assert links[1:] == (Link(expected),), (a, b)
    assert backend.links() == inventory.links


def test_each_nvswitch_is_asked_its_type_once(
    nvidia: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The far end's type belongs to the device at its PCI address: a DGX's 144 switch links end on
    4 NVSwitches, so discovery asks 4 times, and every link still counts (18 per pair)."""
    backend = nvidia.backend(nvidia.node(dgx_h100_node("switch")))
    log = tmp_path / "nvml-calls.log"
    monkeypatch.setenv(CALL_LOG_ENV, str(log))
    inventory = backend.discover()
    monkeypatch.delenv(CALL_LOG_ENV)
    calls = Counter(log.read_text().split())
    assert calls["nvmlDeviceGetNvLinkRemotePciInfo_v2"] == 8 * 18  # the log counts what it should
    assert calls["nvmlDeviceGetNvLinkRemoteDeviceType"] == 4
    ids = [c.id for c in inventory.cards]
    assert inventory.links.between(ids[0], ids[7])[0] == Link(LinkKind.NVLINK, count=18, bandwidth_gbps=450.0)


def test_a_placeholder_remote_address_is_asked_its_type_per_link(nvidia: Harness) -> None:
    """Links whose far end the driver reports as 0000:00:00.0 are not one device: card 0's first link
    ends on something that is not a switch, every other link on an NVSwitch, all at that address.
    Sharing the first answer by address would count no switch link on any card."""
    node = dgx_h100_node("switch")
    gpus = cast("list[dict[str, list[dict[str, str]]]]", node["gpus"])
    for gpu in gpus:
        gpu["nvlinks"] = [{**link, "remote": "00000000:00:00.0"} for link in gpu["nvlinks"]]
    gpus[0]["nvlinks"][0]["type"] = "gpu"
    inventory = nvidia.backend(nvidia.node(node)).discover()
    ids = [c.id for c in inventory.cards]
    assert inventory.links.between(ids[0], ids[7])[0] == Link(LinkKind.NVLINK, count=17, bandwidth_gbps=425.0)
    assert inventory.links.between(ids[1], ids[7])[0] == Link(LinkKind.NVLINK, count=18, bandwidth_gbps=450.0)


def test_dgx_direct_mesh_links(nvidia: Harness) -> None:
    inventory = nvidia.backend(nvidia.node(dgx_h100_node("mesh"))).discover()
    ids = [c.id for c in inventory.cards]
    for a, b in itertools.combinations(range(8), 2):
        assert inventory.links.between(ids[a], ids[b])[0] == Link(
            LinkKind.NVLINK, count=2, bandwidth_gbps=50.0
        )


def test_pcie_cards_have_pcie_links_only(nvidia: Harness) -> None:
    inventory = nvidia.backend(nvidia.node(pcie_node(4))).discover()
    ids = [c.id for c in inventory.cards]
    assert inventory.cards[0].model == "NVIDIA H100 PCIe"
    assert inventory.cards[0].pci_device_id == 0x2331
    assert inventory.links.between(ids[0], ids[1]) == (Link(LinkKind.PCIE_HOST_BRIDGE),)
    assert inventory.links.between(ids[0], ids[2]) == (Link(LinkKind.CROSS_SOCKET),)


def test_nvl_bridged_pairs(nvidia: Harness) -> None:
    inventory = nvidia.backend(nvidia.node(pcie_node(4, bridged=True))).discover()
    ids = [c.id for c in inventory.cards]
    assert inventory.links.between(ids[0], ids[1])[0] == Link(LinkKind.NVLINK, count=12, bandwidth_gbps=300.0)
    assert inventory.links.between(ids[2], ids[3])[0].kind == LinkKind.NVLINK
    assert inventory.links.between(ids[1], ids[2]) == (Link(LinkKind.CROSS_SOCKET),)


def test_missing_nvlink_symbols_leave_pcie_links(nvidia: Harness, fake_lib_without_nvlink: Path) -> None:
    node = nvidia.node(dgx_h100_node())
    inventory = nvidia.backend(node, lib=fake_lib_without_nvlink).discover()
    ids = [c.id for c in inventory.cards]
    assert len(inventory.cards) == 8
    assert inventory.links.between(ids[0], ids[1]) == (Link(LinkKind.PCIE_SWITCH),)
    assert all(link.kind != LinkKind.NVLINK for links in inventory.links.links.values() for link in links)


def test_unsupported_topology_leaves_nvlink_links(nvidia: Harness) -> None:
    node = dgx_h100_node()
    node["not_supported"] = ["nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetCudaComputeCapability"]
    inventory = nvidia.backend(nvidia.node(node)).discover()
    ids = [c.id for c in inventory.cards]
    assert inventory.links.between(ids[0], ids[7]) == (Link(LinkKind.NVLINK, count=18, bandwidth_gbps=450.0),)
    assert "computeCapability" not in inventory.cards[0].attributes


def test_numa_node_from_sysfs_first(nvidia: Harness) -> None:
    description = pcie_node(2)
    node = nvidia.node(description, sysfs_numa=True)
    numa_file = node.host_root / "sys/bus/pci/devices/0000:27:00.0/numa_node"
    numa_file.write_text("-1\n")  # a VM: unknown, and NVML must not be asked to guess
    inventory = nvidia.backend(node).discover()
    assert [c.numa_node for c in inventory.cards] == [0, None]


def test_numa_node_from_nvml_where_gpu_memory_is_a_node(nvidia: Harness) -> None:
    description = pcie_node(2)
    cards = description["gpus"]
    assert isinstance(cards, list)
    for index, card in enumerate(cards):
        card.update(nvml_numa=True, numa_node=4 + index)
    inventory = nvidia.backend(nvidia.node(description)).discover()
    assert [c.numa_node for c in inventory.cards] == [4, 5]


def test_mig_node_mixed_and_single(nvidia: Harness) -> None:
    node = nvidia.node(mig_node())
    inventory = nvidia.backend(node).discover()
    mixed, single, disabled = inventory.cards
    assert [c.attributes["migMode"] for c in inventory.cards] == ["enabled", "enabled", "disabled"]

    mixed_parts = [p for p in inventory.partitions if p.card_id == mixed.id]
    assert [p.profile for p in mixed_parts] == ["2g.20gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert [p.memory_bytes for p in mixed_parts] == [20096 << 20, 9984 << 20, 9984 << 20, 40448 << 20]
    assert all(p.id.startswith("MIG-") for p in mixed_parts)
    assert len({p.id for p in inventory.partitions}) == len(inventory.partitions)

    single_parts = [p for p in inventory.partitions if p.card_id == single.id]
    assert [p.profile for p in single_parts] == ["1g.10gb"] * 7
    assert not [p for p in inventory.partitions if p.card_id == disabled.id]

    three_g = mixed_parts[3]
    gi = int(three_g.attributes["gpuInstanceId"])
    assert dict(three_g.attributes) == {
        "parentMinor": "0",
        "parentIndex": "0",
        "migIndex": "3",
        "gpuInstanceId": str(gi),
        "computeInstanceId": "0",
        "gpuInstanceProfileId": "9",
        "computeInstanceProfileId": "2",
        "placementStart": "4",
        "placementSize": "4",
        "capGpuInstance": f"/dev/nvidia-caps/nvidia-cap{mig_minor(0, gi)}",
        "capComputeInstance": f"/dev/nvidia-caps/nvidia-cap{mig_minor(0, gi, 0)}",
    }
    assert single_parts[6].attributes["parentMinor"] == "1"
    assert single_parts[6].attributes["migIndex"] == "6"


def test_mig_without_caps_file_has_no_cap_attributes(nvidia: Harness) -> None:
    node = nvidia.node(mig_node())
    (node.host_root / "proc/driver/nvidia-caps/mig-minors").unlink()
    inventory = nvidia.backend(node).discover()
    assert inventory.partitions
    assert all("capGpuInstance" not in p.attributes for p in inventory.partitions)


def test_mig_named_from_attributes_when_instance_calls_are_unsupported(nvidia: Harness) -> None:
    description = mig_node()
    description["not_supported"] = ["nvmlDeviceGetGpuInstanceById"]
    inventory = nvidia.backend(nvidia.node(description)).discover()
    assert [p.profile for p in inventory.partitions[:4]] == ["2g.20gb", "1g.10gb", "1g.10gb", "3g.40gb"]
    assert "gpuInstanceProfileId" not in inventory.partitions[0].attributes


def test_card_that_stops_answering_is_reported_unhealthy(nvidia: Harness) -> None:
    node = nvidia.node(mig_node())
    backend = nvidia.backend(node)
    before = backend.discover()
    node.control.lost(1)
    after = backend.discover()
    assert [c.id for c in after.cards] == [c.id for c in before.cards]
    assert [c.health for c in after.cards] == [Health.HEALTHY, Health.UNHEALTHY, Health.HEALTHY]
    lost_parts = [p for p in after.partitions if p.card_id == before.cards[1].id]
    assert len(lost_parts) == 7
    assert {p.health for p in lost_parts} == {Health.UNHEALTHY}


def test_card_lost_before_first_discovery_is_skipped(nvidia: Harness) -> None:
    description = pcie_node(2)
    description["gpus"][1]["lost"] = True  # type: ignore[index]
    inventory = nvidia.backend(nvidia.node(description)).discover()
    assert [c.index for c in inventory.cards] == [0]


def test_library_failing_keeps_cards_unhealthy(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node)
    backend.discover()
    node.control.fail(999)
    inventory = backend.discover()
    assert [c.health for c in inventory.cards] == [Health.UNHEALTHY, Health.UNHEALTHY]
    node.control.heal()
    assert [c.health for c in backend.discover().cards] == [Health.HEALTHY, Health.HEALTHY]


def test_a_node_without_mig_never_reads_the_mig_minors(nvidia: Harness) -> None:
    """The driver lists ~1,100 minors on an 8-GPU node; only MIG devices need them. Here the file
    is a FIFO that nobody writes, so reading it would block discovery."""
    node = nvidia.node(dgx_h100_node())
    backend = nvidia.backend(node)
    minors = node.host_root / "proc/driver/nvidia-caps/mig-minors"
    minors.unlink()
    os.mkfifo(minors)
    found: list[Inventory] = []
    thread = threading.Thread(target=lambda: found.append(backend.discover()), daemon=True)
    thread.start()
    thread.join(WAIT)
    blocked = thread.is_alive()
    if blocked:  # it is reading the FIFO: give it an end of file, so the thread ends
        os.close(os.open(minors, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(WAIT)
    assert not blocked, "discovery opened the mig-minors FIFO"
    assert [c.id for c in found[0].cards] == [gpu_uuid("dgx", i) for i in range(8)]


def test_a_mig_node_reads_the_mig_minors_once(nvidia: Harness) -> None:
    """The other side: the minors reach MIG devices, from one read of the file however many MIG
    cards there are (a FIFO gives its text once)."""
    node = nvidia.node(mig_node())
    backend = nvidia.backend(node)
    expected = backend.discover().partitions
    minors = node.host_root / "proc/driver/nvidia-caps/mig-minors"
    text = minors.read_bytes()
    minors.unlink()
    os.mkfifo(minors)

    def write_once() -> None:
        with open(minors, "wb") as fifo:  # opens once discovery opens it to read
            fifo.write(text)

    found: list[Inventory] = []
    writer = threading.Thread(target=write_once, daemon=True)
    discovery = threading.Thread(target=lambda: found.append(backend.discover()), daemon=True)
    writer.start()
    discovery.start()
    discovery.join(WAIT)
    writer.join(WAIT)
    if writer.is_alive():  # discovery never opened the FIFO: let the writer's open return
        os.close(os.open(minors, os.O_RDONLY | os.O_NONBLOCK))
    if discovery.is_alive():  # discovery opened it a second time: give that read an end of file
        os.close(os.open(minors, os.O_WRONLY | os.O_NONBLOCK))
    assert found, "discovery read the mig-minors more than once"
    assert found[0].partitions == expected
    assert any("capGpuInstance" in p.attributes for p in expected)


def test_mig_minors_as_the_driver_lists_them() -> None:
    text = "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\ngpu1/gi0/access 138\nbogus\n"
    minors = parse_mig_minors(text)
    assert minors == {(0, 0, None): 3, (0, 0, 0): 4, (1, 0, None): 138}
    assert cap_path(minors, 1, 0) == "/dev/nvidia-caps/nvidia-cap138"
    assert cap_path(minors, 1, 0, 0) is None
    assert [mig_minor(0, 0), mig_minor(0, 1), mig_minor(1, 0), mig_minor(31, 14, 7)] == [3, 12, 138, 4322]


@pytest.mark.parametrize(
    ("bus_id", "address"),
    [
        ("00000000:17:00.0", "0000:17:00.0"),
        ("0000:3B:00.0", "0000:3b:00.0"),
        ("00000001:DB:00.0", "0001:db:00.0"),
        ("17:00.0", "0000:17:00.0"),
    ],
)
def test_pci_addresses_are_normalised(bus_id: str, address: str) -> None:
    assert normalise_bus_id(bus_id) == address
