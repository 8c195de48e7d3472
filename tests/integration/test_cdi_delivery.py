"""CDI end to end: the daemon writes specs for real backends on their fakes, pools answer Allocate
with CDI names, and the names resolve in the written specs the way containerd resolves them.

Also restarts: two daemons in turn over one CDI directory, a card hot-removed between them, leave
exactly the current specs, no temp file, no stale file of a vendor gone, and another tool's file as
it was.
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
from hcs_deviceplugin.daemon import Daemon, DaemonConfig, DaemonView
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.records import AllocationError
from hcs_deviceplugin.model import DeviceDelivery
from hcs_deviceplugin.observability.probes import readiness
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.cdi.runtime import CdiRegistry, annotation_names
from tests.integration.conftest import H100, WAIT, card_pool, pool_doc, resource
from vendors import cambricon, hygon
from vendors.cambricon.fake import FakeMluNode, mlulink_node, write_cambricon_node
from vendors.hygon.fake import FakeHygonNode, write_hygon_node, xgmi_node
from vendors.simulated import create_backend as create_simulated

RESCAN = {"udev": "off", "rescanSeconds": "0.05"}


@dataclass
class CdiNode:
    root: Path
    hygon: FakeHygonNode
    cambricon: FakeMluNode
    kubelet: KubeletSimulator
    stop: threading.Event

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    def backends(self) -> dict[str, Backend]:
        """Fresh backend instances, as a restarted daemon creates them."""
        return {
            "hygon": hygon.create_backend(
                BackendConfig(host_root=self.hygon.host_root, options=RESCAN, stop=self.stop)
            ),
            "cambricon": cambricon.create_backend(
                BackendConfig(host_root=self.cambricon.host_root, options=RESCAN, stop=self.stop)
            ),
        }

    def daemon(
        self, backends: dict[str, Backend], *, cdi: bool = True, cdi_dir: Path | None = None
    ) -> Daemon:
        daemon = Daemon(
            DaemonConfig(
                plugin_dir=self.root / "dp",
                node_name="node-1",
                registration_backoff=Backoff(0.02, 0.2),
                pod_resources_socket=self.root / "pr.sock",
                pod_resources_interval=0.1,
                allocation_settle_seconds=0.3,
                cdi_dir=(cdi_dir or self.cdi_dir) if cdi else None,
                backend_host_roots={"hygon": self.hygon.host_root, "cambricon": self.cambricon.host_root},
            ),
            backends,
        )
        daemon.add_source(lambda cb: DirectoryPoolSource(self.root / "pools", cb))
        return daemon

    def write_pools(self, *pools: dict[str, object]) -> None:
        write_configmap_volume(self.root / "pools", {"pools.yaml": pool_doc(*pools)})


@pytest.fixture
def cdi_node() -> Iterator[CdiNode]:
    root = Path(tempfile.mkdtemp(prefix="hcsc", dir="/tmp"))
    stop = threading.Event()
    dcu = write_hygon_node(root / "hygon", xgmi_node(2, hives=1))
    mlu = write_cambricon_node(root / "cambricon", mlulink_node(4))
    kubelet = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    kubelet.start()
    try:
        yield CdiNode(root, dcu, mlu, kubelet, stop)
    finally:
        stop.set()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def card_ids(backend: Backend) -> list[str]:
    return [c.id for c in backend.discover().cards]


def test_cdi_pools_answer_with_names_that_resolve_in_the_written_specs(cdi_node: CdiNode) -> None:
    backends = cdi_node.backends()
    dcus, mlus = card_ids(backends["hygon"]), card_ids(backends["cambricon"])
    cdi_node.write_pools(
        card_pool("dcu", *dcus, slicesPerUnit=2, deviceDelivery="cdi-annotations"),
        card_pool("mlu", *mlus[:2], deviceDelivery="cdi-cri"),
        card_pool("mlu-classic", *mlus[2:]),
    )
    daemon = cdi_node.daemon(backends)
    daemon.start()
    try:
        names = [resource(p) for p in ("dcu", "mlu", "mlu-classic")]
        cdi_node.kubelet.wait_for(
            lambda k: all(n in k.resources() and k.resource(n).connected for n in names), WAIT, "3 pools"
        )
        registry = CdiRegistry.load(cdi_node.cdi_dir)
        assert {p.name for p in cdi_node.cdi_dir.iterdir()} == {
            "hcs-deviceplugin-hygon.json",
            "hcs-deviceplugin-cambricon.json",
        }

        mlu = cdi_node.kubelet.allocate("p-mlu", "c", resource("mlu"), 2).response
        assert list(mlu.devices) == [] and list(mlu.mounts) == [], "CDI carries the nodes"
        assert sorted(mlu.envs["CAMBRICON_VISIBLE_DEVICES"].split(",")) == ["0", "1"], "env still travels"
        mlu_state = registry.resolve(d.name for d in mlu.cdi_devices)
        assert {p for p in mlu_state.device_nodes if p.startswith("/dev/cambricon_dev")} == {
            "/dev/cambricon_dev0",
            "/dev/cambricon_dev1",
        }
        for node in mlu_state.device_nodes.values():
            assert (cdi_node.cambricon.host_root / node["hostPath"].lstrip("/")).exists()

        dcu = cdi_node.kubelet.allocate("p-dcu", "c", resource("dcu"), 2).response
        assert list(dcu.devices) == [] and list(dcu.cdi_devices) == []
        dcu_names = annotation_names(dcu.annotations)
        assert len(dcu_names) in (1, 2), "two replicas of one card name it once"
        dcu_state = registry.resolve(dcu_names)
        assert "/dev/kfd" in dcu_state.device_nodes
        assert dcu.envs["HIP_VISIBLE_DEVICES"] == ",".join(str(i) for i in range(len(dcu_names)))

        classic = cdi_node.kubelet.allocate("p-classic", "c", resource("mlu-classic"), 1).response
        assert classic.devices and not classic.cdi_devices
        assert not any(k.startswith("cdi.k8s.io/") for k in classic.annotations)

        # The classic pool switches to CDI live: same socket, next Allocate names the spec.
        cdi_node.write_pools(
            card_pool("dcu", *dcus, slicesPerUnit=2, deviceDelivery="cdi-annotations"),
            card_pool("mlu", *mlus[:2], deviceDelivery="cdi-cri"),
            card_pool("mlu-classic", *mlus[2:], deviceDelivery="cdi-cri"),
        )

        def switched(view: DaemonView) -> bool:
            pool = view.pools.get("mlu-classic")
            return pool is not None and pool.pool.device_delivery is DeviceDelivery.CDI_CRI

        daemon.wait_for(switched, WAIT, "mlu-classic switched to cdi-cri")
        switched_answer = cdi_node.kubelet.allocate("p-switched", "c", resource("mlu-classic"), 1).response
        assert not switched_answer.devices
        state = registry.resolve(d.name for d in switched_answer.cdi_devices)
        assert {p for p in state.device_nodes if p.startswith("/dev/cambricon_dev")} <= {
            "/dev/cambricon_dev2",
            "/dev/cambricon_dev3",
        }
    finally:
        cdi_node.stop.set()
        daemon.stop()


def test_new_partitions_get_spec_entries_that_the_pool_names(cdi_node: CdiNode) -> None:
    """A pool asks for a profile the card does not have: the daemon lays it out, the spec gains the
    new partitions, and the pool's Allocate names one that resolves to the card and its own node."""
    simulated = create_simulated(BackendConfig(options={"node": "builtin:default"}, stop=cdi_node.stop))
    cdi_node.write_pools(
        {
            "name": "big",
            "unit": "Partition",
            "profile": "3g.40gb",
            "deviceDelivery": "cdi-cri",
            "devices": [{"uuid": H100[3]}],
        }
    )
    assert not [p for p in simulated.discover().partitions if p.profile == "3g.40gb"]
    in_spec_when_seen: list[bool] = []

    def seen(k: KubeletSimulator) -> bool:
        if resource("big") not in k.resources() or not k.resource(resource("big")).healthy:
            return False
        names = {f"hcs.deckhouse.io/simulated={unit}" for unit in k.resource(resource("big")).healthy}
        in_spec_when_seen.append(names <= spec_devices(cdi_node.cdi_dir))
        return True

    daemon = cdi_node.daemon({"simulated": simulated})
    daemon.start()
    try:
        cdi_node.kubelet.wait_for(seen, WAIT, "the laid-out partitions advertised")
        assert in_spec_when_seen[0], "advertised without CDI entries"
        record = cdi_node.kubelet.allocate("p", "c", resource("big"), 1)
        (name,) = [d.name for d in record.response.cdi_devices]
        assert "-3g.40gb-" in name
        state = CdiRegistry.load(cdi_node.cdi_dir).resolve([name])
        assert "/dev/hcs-sim/card3" in state.device_nodes and len(state.device_nodes) == 2
    finally:
        cdi_node.stop.set()
        daemon.stop()


def test_the_spec_is_on_disk_before_kubelet_sees_a_device(cdi_node: CdiNode) -> None:
    """The applier writes the specs before it starts or updates any pool, so no pod can be given a
    name its runtime cannot resolve yet: at start, kubelet's first device list comes after the file."""
    backends = cdi_node.backends()
    mlus = card_ids(backends["cambricon"])
    cdi_node.write_pools(card_pool("mlu", *mlus, deviceDelivery="cdi-cri"))
    in_spec_when_seen: list[bool] = []

    def seen(k: KubeletSimulator) -> bool:
        if resource("mlu") not in k.resources() or not k.resource(resource("mlu")).healthy:
            return False
        names = {f"hcs.deckhouse.io/mlu={card}" for card in k.resource(resource("mlu")).healthy}
        in_spec_when_seen.append(names <= spec_devices(cdi_node.cdi_dir))
        return True

    daemon = cdi_node.daemon(backends)
    # Watch from the first device list on: start() returns only after the first apply is done.
    starting = threading.Thread(target=daemon.start, daemon=True)
    starting.start()
    try:
        cdi_node.kubelet.wait_for(seen, WAIT, "the MLU pool's first device list")
        assert in_spec_when_seen[0], "kubelet saw devices whose CDI entries were not written yet"
    finally:
        starting.join(WAIT)
        cdi_node.stop.set()
        daemon.stop()


def spec_devices(directory: Path) -> set[str]:
    return set(CdiRegistry.load(directory).devices)


def mlu_devices(directory: Path) -> set[str]:
    return {n for n in spec_devices(directory) if n.startswith("hcs.deckhouse.io/mlu=")}


def test_restarts_leave_exactly_the_current_specs(cdi_node: CdiNode) -> None:
    cdi_node.cdi_dir.mkdir()
    foreign = cdi_node.cdi_dir / "nvidia.yaml"
    foreign.write_text(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: all, containerEdits: {env: [A=1]}}]\n"
    )
    backends = cdi_node.backends()
    mlus = backends["cambricon"].discover().cards
    cdi_node.write_pools(card_pool("mlu", *(c.id for c in mlus), deviceDelivery="cdi-cri"))
    expected = {f"hcs.deckhouse.io/mlu={c.id}" for c in mlus}

    for restart, removed in enumerate((None, mlus[0])):
        if removed is not None:
            cdi_node.cambricon.remove(removed.pci_address)
            # Chip ids follow the board's chip order, so the survivors are what a fresh discovery says.
            survivors = card_ids(cdi_node.backends()["cambricon"])
            assert len(survivors) == len(mlus) - 1
            expected = {f"hcs.deckhouse.io/mlu={c}" for c in survivors}
            # What a daemon killed mid-write leaves, and the file of a vendor this node no longer runs.
            (cdi_node.cdi_dir / ".hcs-deviceplugin-cambricon.json.999.dead.tmp").write_text('{"cdiVer')
            (cdi_node.cdi_dir / "hcs-deviceplugin-ascend.json").write_text("{}")
        daemon = cdi_node.daemon(cdi_node.backends() if restart else backends)
        daemon.start()
        try:
            want = frozenset(expected)

            def current(_view: DaemonView, want: frozenset[str] = want) -> bool:
                return mlu_devices(cdi_node.cdi_dir) == want

            daemon.wait_for(current, WAIT, f"spec of restart {restart}")
            assert sorted(p.name for p in cdi_node.cdi_dir.iterdir()) == [
                "hcs-deviceplugin-cambricon.json",
                "hcs-deviceplugin-hygon.json",
                "nvidia.yaml",
            ]
            assert "nvidia.com/gpu=all" in spec_devices(cdi_node.cdi_dir)
        finally:
            daemon.stop()
    assert foreign.read_text().startswith("cdiVersion: 0.5.0\nkind: nvidia.com/gpu")


def test_a_spec_that_cannot_be_written_makes_the_daemon_unready(cdi_node: CdiNode) -> None:
    blocker = cdi_node.root / "not-a-dir"
    blocker.write_text("a file where the CDI directory should be")
    backends = cdi_node.backends()
    mlus = card_ids(backends["cambricon"])
    cdi_node.write_pools(card_pool("mlu", *mlus))
    daemon = cdi_node.daemon(backends, cdi_dir=blocker / "cdi")
    daemon.start()
    try:
        cdi_node.kubelet.wait_for(
            lambda k: resource("mlu") in k.resources() and k.resource(resource("mlu")).connected, WAIT, "mlu"
        )
        view = daemon.wait_for(lambda v: bool(v.cdi_error), WAIT, "the CDI write error in the view")
        assert readiness(view) == (True, []), "no pool names CDI devices: the failure is only logged"
        cdi_node.write_pools(card_pool("mlu", *mlus, deviceDelivery="cdi-cri"))

        def cdi_pool(v: DaemonView) -> bool:
            return "mlu" in v.pools and v.pools["mlu"].pool.device_delivery is DeviceDelivery.CDI_CRI

        ready, reasons = readiness(daemon.wait_for(cdi_pool, WAIT, "the pool switched to cdi-cri"))
        assert not ready
        assert any(r.startswith("cdi: cannot write CDI specs in") and "(pools mlu)" in r for r in reasons), (
            reasons
        )
    finally:
        cdi_node.stop.set()
        daemon.stop()


def test_a_cdi_pool_without_a_cdi_dir_is_reported_and_refused(cdi_node: CdiNode) -> None:
    backends = cdi_node.backends()
    cdi_node.write_pools(card_pool("mlu", *card_ids(backends["cambricon"]), deviceDelivery="cdi-annotations"))
    daemon = cdi_node.daemon(backends, cdi=False)
    daemon.start()
    try:
        cdi_node.kubelet.wait_for(
            lambda k: resource("mlu") in k.resources() and k.resource(resource("mlu")).connected, WAIT, "mlu"
        )
        ready, reasons = readiness(daemon.view())
        assert not ready
        assert "pool mlu: deviceDelivery cdi-annotations needs CDI specs, but --cdi-dir is empty" in reasons
        with pytest.raises(AllocationError, match="writes no CDI specs"):
            cdi_node.kubelet.allocate("p", "c", resource("mlu"), 1)
        assert not (cdi_node.root / "cdi").exists()
    finally:
        cdi_node.stop.set()
        daemon.stop()
