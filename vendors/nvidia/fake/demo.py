"""``simulate --hardware fake``: two PCIe H100s on the fake libnvidia-ml, served by the real backend.

Registered in the entry-point group ``hcs_deviceplugin.fake_hardware``. A card fails by falling off
the bus (GPU_IS_LOST) and mends when it answers again; the backend brings it back after one second
without a critical event.
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.simulation.hardware import FakeHardware
from vendors.nvidia.fake.node import pcie_node
from vendors.nvidia.fake.prepare import prepare_fake_node


def prepare(directory: Path) -> FakeHardware:
    fake = prepare_fake_node(directory, pcie_node(2, seed="simulate"))
    return FakeHardware(
        backend="nvidia",
        host_root=fake.host_root,
        options={**fake.backend_options, "recoverySeconds": "1", "healthWaitMs": "100"},
        env=fake.env,
        fail=lambda card: fake.control.lost(card.id),
        mend=lambda card: fake.control.restore(card.id),
    )


__all__ = ["prepare"]
