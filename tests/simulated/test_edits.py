"""ContainerEdits for cards, replicas and partitions."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount, Unit, replica_unit_id
from tests.simulated.conftest import card, make_backend
from vendors.simulated import SimulatedBackend
from vendors.simulated.edits import partition_device_path

DRIVER_MOUNT = Mount("/usr/local/hcs-sim", "/usr/local/hcs-sim", read_only=True)


def node() -> SimulatedBackend:
    return make_backend(
        {
            "cards": [
                card("GPU-a", index=3, partitions=[{"id": "MIG-GPU-a/1/0", "profile": "1g.10gb"}]),
                card("0000:63:00.0", index=5),
            ]
        }
    )


def dev(path: str) -> DeviceNode:
    return DeviceNode(path, path, "rw")


def test_no_units_no_edits() -> None:
    assert node().container_edits([]) == ContainerEdits()


def test_whole_cards() -> None:
    units = [Unit("GPU-a", "GPU-a", "simulated"), Unit("0000:63:00.0", "0000:63:00.0", "simulated")]
    edits = node().container_edits(units)
    assert edits.devices == (dev("/dev/hcs-sim/card3"), dev("/dev/hcs-sim/card5"))
    assert dict(edits.env) == {"HCS_SIM_VISIBLE_DEVICES": "GPU-a,0000:63:00.0"}
    assert dict(edits.annotations) == {"hcs.io/simulated-units": "GPU-a,0000:63:00.0"}
    assert edits.cdi_devices == (), "CDI names are the core's, for pools that deliver through CDI"
    assert edits.mounts == (DRIVER_MOUNT,)


def test_replicas_of_one_card_share_its_hardware() -> None:
    units = [
        Unit(replica_unit_id("GPU-a", 0), "GPU-a", "simulated", replica=0),
        Unit(replica_unit_id("GPU-a", 2), "GPU-a", "simulated", replica=2),
    ]
    edits = node().container_edits(units)
    assert edits.devices == (dev("/dev/hcs-sim/card3"),)
    assert edits.env["HCS_SIM_VISIBLE_DEVICES"] == "GPU-a"
    assert edits.annotations["hcs.io/simulated-units"] == "GPU-a::0,GPU-a::2"


def test_partition_gets_its_card_and_its_own_node() -> None:
    part = "MIG-GPU-a/1/0"
    units = [
        Unit(part, "GPU-a", "simulated", partition_id=part),
        Unit(replica_unit_id(part, 1), "GPU-a", "simulated", partition_id=part, replica=1),
    ]
    edits = node().container_edits(units, options={"deviceListStrategy": "envvar"})
    assert edits.devices == (dev("/dev/hcs-sim/card3"), dev("/dev/hcs-sim/part-MIG-GPU-a-1-0"))
    assert edits.env["HCS_SIM_VISIBLE_DEVICES"] == part
    assert edits.annotations["hcs.io/simulated-units"] == f"{part},{part}::1"


def test_card_and_its_partition_together() -> None:
    units = [Unit("GPU-a", "GPU-a", "simulated"), Unit("p", "GPU-a", "simulated", partition_id="p")]
    edits = node().container_edits(units)
    assert [d.container_path for d in edits.devices] == ["/dev/hcs-sim/card3", "/dev/hcs-sim/part-p"]
    assert edits.env["HCS_SIM_VISIBLE_DEVICES"] == "GPU-a,p"


def test_partition_paths_are_single_file_names() -> None:
    assert partition_device_path("a/../b c") == "/dev/hcs-sim/part-a-..-b-c"


def test_foreign_or_unknown_units_are_refused() -> None:
    backend = node()
    with pytest.raises(ValueError, match="belongs to backend 'nvidia'"):
        backend.container_edits([Unit("GPU-a", "GPU-a", "nvidia")])
    with pytest.raises(ValueError, match="does not have"):
        backend.container_edits([Unit("GPU-z", "GPU-z", "simulated")])
