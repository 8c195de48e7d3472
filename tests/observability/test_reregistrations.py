"""hcs_pool_reregistrations_total counts registrations that happened, once per kubelet restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from tests.integration.conftest import H100, WAIT, Node, card_pool, fresh_node, pool_doc, resource
from tests.observability.conftest import scrape, value

RESTARTS = 8


@pytest.fixture
def node() -> Iterator[Node]:
    with fresh_node() as n:
        yield n


def test_each_kubelet_restart_is_one_registration_and_one_count(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    metrics = Metrics()
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=node.plugin_dir,
            node_name="node-1",
            registration_backoff=Backoff(initial=0.02, maximum=0.2),
            pod_resources_socket=node.root / "pr.sock",
            pod_resources_interval=0.1,
        ),
        {node.backend.name: node.backend},
        observer=metrics,
    )
    daemon.add_source(lambda on_change: DirectoryPoolSource(node.pools_dir, on_change))
    node.daemon = daemon
    daemon.start()
    node.wait_registered("a", "b")
    for round_ in range(1, RESTARTS + 1):
        node.kubelet.restart()
        node.kubelet.wait_for(
            lambda k, n=round_: all(  # type: ignore[misc]
                k.resource(resource(p)).registrations >= n + 1 and k.resource(resource(p)).connected
                for p in "ab"
            ),
            WAIT,
            f"re-registered after restart {round_}",
        )
    # Let any late duplicate (the socket check racing the kubelet.sock event) show up before counting.
    daemon.wait_for(lambda v: all(p.server.registrations >= RESTARTS + 1 for p in v.pools.values()), WAIT)
    node.kubelet.wait_for(lambda k: all(k.resource(resource(p)).connected for p in "ab"), WAIT, "streaming")
    samples = scrape(metrics)
    for pool in "ab":
        seen = node.kubelet.resource(resource(pool)).registrations
        assert seen == RESTARTS + 1, f"pool {pool}: {seen} registrations for {RESTARTS} restarts"
        assert value(samples, "hcs_pool_reregistrations_total", pool=pool) == seen - 1
