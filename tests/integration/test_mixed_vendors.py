"""NVIDIA (fake libnvidia-ml through pynvml), Hygon and Cambricon (sysfs trees) in one daemon.

Each vendor's real backend runs on its own fake; one pool per vendor; a pod from each pool gets that
vendor's devices and environment and nothing of the others; a fault on one vendor's hardware reaches
the kubelet for that pool only.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import Backend, BackendConfig
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, card_pool, pool_doc, resource
from vendors import cambricon, hygon, nvidia
from vendors.cambricon.fake import FakeMluNode, mlulink_node, write_cambricon_node
from vendors.hygon.fake import FakeHygonNode, write_hygon_node, xgmi_node
from vendors.nvidia.fake.node import pcie_node
from vendors.nvidia.fake.prepare import FakeNvidiaNode, prepare_fake_node

RESCAN = {"udev": "off", "rescanSeconds": "0.05"}


@dataclass
class MixedNode:
    root: Path
    nvidia: FakeNvidiaNode
    hygon: FakeHygonNode
    cambricon: FakeMluNode
    backends: dict[str, Backend]
    kubelet: KubeletSimulator
    stop: threading.Event


@pytest.fixture
def mixed(monkeypatch: pytest.MonkeyPatch) -> Iterator[MixedNode]:
    root = Path(tempfile.mkdtemp(prefix="hcsm", dir="/tmp"))
    stop = threading.Event()
    nv = prepare_fake_node(root / "nvidia", pcie_node(2, seed="mixed"))
    for key, value in nv.env.items():
        monkeypatch.setenv(key, value)
    dcu = write_hygon_node(root / "hygon", xgmi_node(4, hives=1))
    mlu = write_cambricon_node(root / "cambricon", mlulink_node(4))
    backends: dict[str, Backend] = {
        "nvidia": nvidia.create_backend(
            BackendConfig(
                host_root=nv.host_root,
                options={**nv.backend_options, "recoverySeconds": "0.2", "healthWaitMs": "50"},
                stop=stop,
            )
        ),
        "hygon": hygon.create_backend(BackendConfig(host_root=dcu.host_root, options=RESCAN, stop=stop)),
        "cambricon": cambricon.create_backend(
            BackendConfig(host_root=mlu.host_root, options=RESCAN, stop=stop)
        ),
    }
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    try:
        yield MixedNode(root, nv, dcu, mlu, backends, kubelet, stop)
    finally:
        stop.set()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_three_vendors_one_daemon_separate_pools(mixed: MixedNode) -> None:
    ids = {name: [c.id for c in b.discover().cards] for name, b in mixed.backends.items()}
    assert [len(ids[n]) for n in ("nvidia", "hygon", "cambricon")] == [2, 4, 4]
    write_configmap_volume(
        mixed.root / "pools",
        {
            "pools.yaml": pool_doc(
                card_pool("gpu", *ids["nvidia"]),
                card_pool("dcu", *ids["hygon"], slicesPerUnit=2),
                card_pool("mlu", *ids["cambricon"]),
            )
        },
    )
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=mixed.root / "dp", node_name="node-1", registration_backoff=Backoff(0.02, 0.2)
        ),
        mixed.backends,
    )
    daemon.add_source(lambda cb: DirectoryPoolSource(mixed.root / "pools", cb))
    daemon.start()
    try:
        names = [resource(p) for p in ("gpu", "dcu", "mlu")]
        mixed.kubelet.wait_for(
            lambda k: all(n in k.resources() and k.resource(n).connected for n in names), WAIT, "3 pools"
        )
        assert mixed.kubelet.resource(resource("gpu")).healthy == set(ids["nvidia"])
        assert len(mixed.kubelet.resource(resource("dcu")).healthy) == 8
        assert mixed.kubelet.resource(resource("mlu")).healthy == set(ids["cambricon"])

        gpu = mixed.kubelet.allocate("p-gpu", "c", resource("gpu"), 1).response
        dcu = mixed.kubelet.allocate("p-dcu", "c", resource("dcu"), 1).response
        mlu = mixed.kubelet.allocate("p-mlu", "c", resource("mlu"), 2).response
        assert gpu.envs["NVIDIA_VISIBLE_DEVICES"] in ids["nvidia"]
        assert not any(k.startswith(("HIP_", "CAMBRICON_")) for k in gpu.envs)
        dcu_paths = {d.host_path for d in dcu.devices}
        assert "/dev/kfd" in dcu_paths and any(p.startswith("/dev/dri/renderD") for p in dcu_paths)
        assert dcu.envs["HIP_VISIBLE_DEVICES"] == "0" and "NVIDIA_VISIBLE_DEVICES" not in dcu.envs
        mlu_paths = {d.host_path for d in mlu.devices}
        assert len([p for p in mlu_paths if p.startswith("/dev/cambricon_dev")]) == 2
        assert len(mlu.envs["CAMBRICON_VISIBLE_DEVICES"].split(",")) == 2
        assert not any(p.startswith(("/dev/dri", "/dev/kfd", "/dev/nvidia")) for p in mlu_paths)

        # A fault on Cambricon hardware reaches only the MLU pool.
        gpu_snapshots = mixed.kubelet.resource(resource("gpu")).snapshots
        dcu_snapshots = mixed.kubelet.resource(resource("dcu")).snapshots
        victim = mixed.backends["cambricon"].discover().cards[0]
        mixed.cambricon.set_core_state(victim.pci_address, "CN_BOOTERR")
        mixed.kubelet.wait_for(
            lambda k: victim.id in k.resource(resource("mlu")).unhealthy, WAIT, "MLU fault at kubelet"
        )
        mixed.cambricon.set_core_state(victim.pci_address, "CN_RUNNING")
        mixed.kubelet.wait_for(
            lambda k: victim.id in k.resource(resource("mlu")).healthy, WAIT, "MLU recovered at kubelet"
        )
        assert mixed.kubelet.resource(resource("gpu")).snapshots == gpu_snapshots
        assert mixed.kubelet.resource(resource("dcu")).snapshots == dcu_snapshots
    finally:
        mixed.stop.set()
        daemon.stop()
