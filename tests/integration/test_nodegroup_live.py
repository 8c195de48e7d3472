"""The DKP NodeGroup ConfigMap served by the whole daemon, and a relabelled node applied live.

The simulated node has NVIDIA GPUs (``GPU-…``) and other vendors' cards; DKP's rendered ConfigMap is
mounted beside a native ConfigMap whose pool holds an Ascend chip. Changing the node's
``node.deckhouse.io/device-gpu.config`` label from ``Exclusive`` to ``TimeSlicing`` replaces only the
``nvidia.com/gpu`` pool's server: the native pool keeps its server, its registration and its stream.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeapi.settings import ApiSettings
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.nodegroup import NODE_CONFIG_LABEL, NODE_GROUP_LABEL
from hcs_deviceplugin.runner import Runner, RunSettings
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume
from tests.integration.conftest import WAIT, Node, card_pool, pool_doc, resource
from tests.pools.fakeapiserver import FakeApiServer
from tests.pools.test_nodegroup import fixture

GPU = "nvidia.com/gpu"
NATIVE = resource("npu")


def context(config: str) -> NodeContext:
    return NodeContext("node-1", {NODE_CONFIG_LABEL: config, NODE_GROUP_LABEL: "worker-gpu"})


def test_a_relabelled_node_changes_the_gpu_pool_live_and_leaves_the_others_alone(node: Node) -> None:
    cards = node.backend.discover().cards
    gpus = sorted(c.id for c in cards if c.id.startswith("GPU-"))
    npu = next(c.id for c in cards if c.vendor == "ascend")
    rendered = fixture()
    write_configmap_volume(node.pools_dir / rendered.name, dict(rendered.data))
    write_configmap_volume(
        node.pools_dir / "hcs-deviceplugin-pools", {"pools.yaml": pool_doc(card_pool("npu", npu))}
    )

    daemon = Daemon(
        DaemonConfig(
            plugin_dir=node.plugin_dir,
            node_name="node-1",
            registration_backoff=Backoff(initial=0.02, maximum=0.2),
            pod_resources_socket=node.root / "pr.sock",
            pod_resources_interval=0.1,
        ),
        {node.backend.name: node.backend},
    )
    node.daemon = daemon
    aggregator = PoolAggregator(daemon.set_pools, node=context("Exclusive"))
    daemon.add_source(lambda _on_change: DirectoryPoolSource(node.pools_dir, aggregator=aggregator))
    daemon.start()

    kubelet = node.kubelet
    kubelet.wait_for(
        lambda k: (
            GPU in k.resources()
            and k.resource(GPU).healthy == set(gpus)
            and NATIVE in k.resources()
            and k.resource(NATIVE).stream_opens >= 1
            and k.resource(NATIVE).healthy == {npu}
        ),
        WAIT,
        "nvidia.com/gpu with every GPU, one unit each, and the native pool streaming its chip",
    )
    before = kubelet.resource(NATIVE)
    native_server = daemon.server("npu")

    aggregator.set_node(context("TimeSlicing"))

    replicas = {f"{g}::{n}" for g in gpus for n in range(4)}
    kubelet.wait_for(lambda k: k.resource(GPU).healthy == replicas, WAIT, "4 time-slice replicas of each GPU")
    after = kubelet.resource(NATIVE)
    assert daemon.server("npu") is native_server
    assert (after.registrations, after.stream_opens, after.healthy) == (
        before.registrations,
        before.stream_opens,
        before.healthy,
    )
    assert npu not in {u.split("::")[0] for u in kubelet.resource(GPU).healthy}


def test_the_runner_watches_its_node_and_static_labels_win(tmp_path: Path) -> None:
    rendered = fixture()
    with FakeApiServer() as server:
        server.put_configmap(rendered.namespace, rendered.name, dict(rendered.data), dict(rendered.labels))
        server.put_node("node-1", {NODE_CONFIG_LABEL: "Exclusive", NODE_GROUP_LABEL: "worker-gpu"})
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{server.port}"}}}}]\n'
            "users: [{name: d, user: {token: t}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: d}}]\ncurrent-context: fake\n"
        )
        (tmp_path / "pools").mkdir()
        settings = RunSettings(
            plugin_dir=tmp_path / "plugins",
            pools_dir=tmp_path / "pools",
            host_root=tmp_path,
            vendors=("simulated",),
            node_name="node-1",
            pod_resources_socket=None,
            pod_resources_interval=5.0,
            metrics_address="127.0.0.1",
            metrics_port=0,
            api=ApiSettings(rendered.namespace, "app=nvidia-gpu", kubeconfig=kubeconfig),
            watch_node=True,
        )
        runner = Runner(settings)
        runner.start()
        try:

            def slices() -> int | None:
                pool = runner.aggregator.current.by_name().get("nvidia-gpu")
                return None if pool is None else pool.slices_per_unit

            runner.daemon.wait_for(lambda v: slices() == 1, WAIT, "Exclusive from the watched Node")
            server.put_node("node-1", {NODE_CONFIG_LABEL: "TimeSlicing", NODE_GROUP_LABEL: "worker-gpu"})
            runner.daemon.wait_for(lambda v: slices() == 4, WAIT, "TimeSlicing after the relabel")
        finally:
            runner.stop()

        pinned = Runner(replace(settings, node_config_labels={NODE_CONFIG_LABEL: "Exclusive"}))
        assert pinned.aggregator.node.labels == {NODE_CONFIG_LABEL: "Exclusive"}
        watched = NodeContext("node-1", {NODE_CONFIG_LABEL: "MPS", "other": "x"}, origin="Node node-1")
        merged = pinned._node_context(watched)
        assert merged.labels == {NODE_CONFIG_LABEL: "Exclusive", "other": "x"}
        assert merged.origin == "Node node-1 and --node-config-label"
