"""What loading the NVIDIA backend for ``run`` (``--vendors nvidia``) leaves out until it is needed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

import pytest

from tests.nvidia.conftest import Harness
from vendors.nvidia.fake.node import dgx_h100_node, mig_node

NOT_AT_START = ("uuid",)
"""Only Allocate's ``cdi-annotations`` key needs ``uuid`` (and its C module): no start allocates."""

PROBE = """
import json, sys
from hcs_deviceplugin import runner
from vendors.nvidia import backend
print(json.dumps(sorted(sys.modules)))
"""


def test_loading_the_backend_leaves_out_what_only_allocate_needs() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "vendors.nvidia.edits" in loaded
    assert [m for m in loaded if m in NOT_AT_START] == []


DISCOVERY_PROBE = """
import json, sys, threading
from pathlib import Path
from hcs_deviceplugin.backend import BackendConfig
from vendors.nvidia.backend import create_backend

config = BackendConfig(host_root=Path(sys.argv[1]), options={"library": sys.argv[2]}, stop=threading.Event())
with create_backend(config) as backend:
    inventory = backend.discover()
print(json.dumps({"partitions": len(inventory.partitions), "modules": sorted(sys.modules)}))
"""

MIG_ONLY = ("vendors.nvidia.mig", "vendors.nvidia.nvml_mig")
"""MIG profile tables, device readers and NVML's instance calls: loaded by discovery only for a card
in MIG mode, and by the first MIG layout (``partition``), so a node without MIG never pays for them."""


def discovered_with(nvidia: Harness, description: Mapping[str, object]) -> tuple[int, list[str]]:
    """Discover ``description`` in a fresh interpreter: (partitions found, modules loaded)."""
    node = nvidia.node(description)
    out = subprocess.run(
        [sys.executable, "-c", DISCOVERY_PROBE, str(node.host_root), str(nvidia.lib)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    found = json.loads(out.stdout.splitlines()[-1])
    return found["partitions"], found["modules"]


@pytest.mark.parametrize(
    ("description", "partitions", "mig_loaded"),
    [
        pytest.param(dgx_h100_node(), 0, False, id="no-card-in-mig-mode"),
        pytest.param(mig_node(), 11, True, id="cards-in-mig-mode"),
    ],
)
def test_discovery_loads_the_mig_readers_only_for_a_card_in_mig_mode(
    nvidia: Harness, description: Mapping[str, object], partitions: int, mig_loaded: bool
) -> None:
    found, loaded = discovered_with(nvidia, description)
    assert found == partitions
    assert [m in loaded for m in MIG_ONLY] == [mig_loaded] * len(MIG_ONLY)


SHARING_PROBE = """
import json, sys, threading
from pathlib import Path
from hcs_deviceplugin.backend import BackendConfig, configure_sharing
from hcs_deviceplugin.model import SharingRequest
from vendors.nvidia.backend import create_backend

config = BackendConfig(host_root=Path(sys.argv[1]), options={"library": sys.argv[2]}, stop=threading.Event())
with create_backend(config) as backend:
    card = backend.discover().cards[0].id
    modes = json.loads(sys.argv[3])
    configure_sharing("nvidia", backend, {card: SharingRequest(card, mode, 2) for mode in modes})
    loaded = sorted(sys.modules)
    config.stop.set()
print(json.dumps(loaded))
"""

MPS_ONLY = "vendors.nvidia.mps"
"""The MPS supervisor and client settings: loaded by the first card the core asks to share by MPS."""


@pytest.mark.parametrize(
    ("modes", "mps_loaded"),
    [
        pytest.param([], False, id="nothing-shared"),
        pytest.param(["timeSlicing"], False, id="time-sliced"),
        pytest.param(["mps"], True, id="shared-by-mps"),
    ],
)
def test_the_mps_supervisor_is_loaded_by_the_first_mps_request(
    nvidia: Harness, modes: list[str], mps_loaded: bool
) -> None:
    node = nvidia.node(dgx_h100_node())
    command = [sys.executable, "-c", SHARING_PROBE, str(node.host_root), str(nvidia.lib), json.dumps(modes)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "vendors.nvidia.backend" in loaded
    assert (MPS_ONLY in loaded) is mps_loaded
