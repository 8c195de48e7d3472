"""The NodeGroup ConfigMap through both sources, and the node label as a live pool change.

The fixture is DKP's rendering (``tests/pools/nodegroup/rendered.yaml``). Through the mounted directory
the node's labels are given (``--node-config-label``); through the API the Node itself is watched on the
fake apiserver, and relabelling it changes the pools without a restart. Waits are bounded conditions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.apisource import ApiConfigMapSource
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.nodegroup import MIG_CONFIG_LABEL, NODE_CONFIG_LABEL, NODE_GROUP_LABEL
from hcs_deviceplugin.pools.nodewatch import NodeLabelWatch
from hcs_deviceplugin.pools.objects import ConfigMapObject
from tests.pools.fakeapiserver import FakeApiServer, RecordedRequest
from tests.pools.test_directory import ConfigMapVolume, Recorder, pools_doc
from tests.pools.test_nodegroup import fixture

NODE = "k8s-w1"
GROUP = "worker-gpu"

# What each config serves on this node: (pool, resource, unit and sharing, replicas).
EXPECTED: dict[str, tuple[str, str, str, int]] = {
    "Exclusive": ("nvidia-gpu", "nvidia.com/gpu", "Card", 1),
    "TimeSlicing": ("nvidia-gpu", "nvidia.com/gpu", "Card", 4),
    "Mig": ("nvidia-mig-1g-10gb", "nvidia.com/mig-1g.10gb", "Partition", 1),
    "MPS": ("nvidia-gpu", "nvidia.com/gpu", "Card mps", 4),
}


def labels(config: str) -> dict[str, str]:
    return {NODE_CONFIG_LABEL: config, NODE_GROUP_LABEL: GROUP, MIG_CONFIG_LABEL: "all-1g.10gb"}


def served(pools: PoolSet) -> list[tuple[str, str, str, int]]:
    return [
        (p.name, p.resource_name, f"{p.unit} {p.sharing}".strip(), p.slices_per_unit) for p in pools.pools
    ]


def check(config: str, pools: PoolSet, errors: Sequence[object]) -> None:
    assert errors == []
    assert served(pools) == [EXPECTED[config]]


@pytest.mark.parametrize("config", sorted(EXPECTED))
def test_each_config_through_the_mounted_directory(tmp_path: Path, config: str) -> None:
    rendered = fixture()
    ConfigMapVolume(tmp_path / rendered.name, dict(rendered.data))
    aggregator = PoolAggregator(Recorder(), node=NodeContext(NODE, labels(config)))
    pools, errors = DirectoryPoolSource(tmp_path, aggregator=aggregator).reload()
    check(config, pools, list(errors))


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


class ApiDaemon:
    """The API half of the runner's wiring: ConfigMap watch and Node watch into one aggregator."""

    def __init__(self, server: FakeApiServer) -> None:
        self.recorder = Recorder()
        self.aggregator = PoolAggregator(self.recorder, node=NodeContext(NODE))
        self.client = server.api_client()
        self.source = ApiConfigMapSource(
            self.client,
            "d8-nvidia-gpu",
            "app in (nvidia-gpu, hcs)",
            self._objects,
            backoff_initial=0.05,
            backoff_max=0.2,
        )
        self.watch = NodeLabelWatch(
            self.client, NODE, self.aggregator.set_node, backoff_initial=0.05, backoff_max=0.2
        )

    def _objects(self, objects: list[ConfigMapObject]) -> None:
        self.aggregator.update("api", objects)

    def start(self) -> None:
        self.source.start()
        self.watch.start()
        assert self.source.wait_synced(5.0) and self.watch.wait_synced(5.0)

    def stop(self) -> None:
        self.watch.stop()
        self.source.stop()
        self.client.close()


@pytest.fixture
def api_daemon(server: FakeApiServer) -> Iterator[ApiDaemon]:
    rendered = fixture()
    server.put_configmap(rendered.namespace, rendered.name, dict(rendered.data), dict(rendered.labels))
    daemon = ApiDaemon(server)
    yield daemon
    daemon.stop()


@pytest.mark.parametrize("config", sorted(EXPECTED))
def test_each_config_through_the_api_with_the_node_watched(
    server: FakeApiServer, api_daemon: ApiDaemon, config: str
) -> None:
    server.put_node(NODE, labels(config))
    api_daemon.start()
    call = api_daemon.recorder.wait_for(lambda pools, errors: api_daemon.watch.current is not None)
    check(config, *call)

    def node_watch(request: RecordedRequest) -> bool:
        return (
            request.path == "/api/v1/nodes" and request.query.get("fieldSelector") == f"metadata.name={NODE}"
        )

    assert server.requests(node_watch), "the Node was not listed by name"


def test_relabelling_the_node_changes_only_the_pool_it_picks(
    server: FakeApiServer, api_daemon: ApiDaemon
) -> None:
    server.put_configmap("d8-nvidia-gpu", "team-native", {"pools.yaml": pools_doc("native")}, {"app": "hcs"})
    server.put_node(NODE, labels("Exclusive"))
    api_daemon.start()
    before, _ = api_daemon.recorder.wait_for(lambda pools, errors: "nvidia-gpu" in pools.names())
    assert before.by_name()["nvidia-gpu"].slices_per_unit == 1
    calls = api_daemon.recorder.count()

    server.put_node(NODE, labels("TimeSlicing"))
    after, errors = api_daemon.recorder.wait_for(
        lambda pools, errors: (
            pools.by_name().get("nvidia-gpu") is not None
            and pools.by_name()["nvidia-gpu"].slices_per_unit == 4
        )
    )

    assert errors == []
    assert after.by_name()["native"] is before.by_name()["native"], "the native pool was parsed again"
    assert api_daemon.recorder.count() == calls + 1, "one relabel, one change"


def test_a_label_change_that_changes_nothing_is_not_a_change(
    server: FakeApiServer, api_daemon: ApiDaemon
) -> None:
    server.put_node(NODE, labels("Exclusive"))
    api_daemon.start()
    api_daemon.recorder.wait_for(lambda pools, errors: "nvidia-gpu" in pools.names())
    calls = api_daemon.recorder.count()
    server.put_node(NODE, {**labels("Exclusive"), "unrelated": "yes"})
    server.put_node(NODE, labels("TimeSlicing"))  # the next visible change: a spurious call would come first
    api_daemon.recorder.wait_for(lambda pools, errors: pools.by_name()["nvidia-gpu"].slices_per_unit == 4)
    assert api_daemon.recorder.count() == calls + 1


def test_a_label_naming_no_config_keeps_the_last_good_pools(
    server: FakeApiServer, api_daemon: ApiDaemon
) -> None:
    server.put_node(NODE, labels("TimeSlicing"))
    api_daemon.start()
    api_daemon.recorder.wait_for(lambda pools, errors: "nvidia-gpu" in pools.names())
    server.put_node(NODE, labels("Nonsense"))
    pools, errors = api_daemon.recorder.wait_for(lambda pools, errors: bool(errors))
    assert pools.by_name()["nvidia-gpu"].slices_per_unit == 4
    assert "=Nonsense names no config here" in str(errors[0])


def test_unchanged_node_context_does_not_reparse() -> None:
    recorder = Recorder()
    aggregator = PoolAggregator(recorder, node=NodeContext(NODE, labels("Exclusive")))
    aggregator.update("test", [fixture()])
    assert recorder.count() == 1
    aggregator.set_node(NodeContext(NODE, labels("Exclusive"), origin="elsewhere"))
    assert recorder.count() == 1
    aggregator.set_node(NodeContext(NODE, labels("Mig")))
    assert served(recorder.call(1)[0]) == [EXPECTED["Mig"]]
