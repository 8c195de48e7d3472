"""A simulated node (kubelet simulator, simulated backend, pools volume) with the observability server.

Built from the integration fixture's pieces; the daemon is made here rather than by
``Node.start_daemon`` so tests can declare absent backends, and the HTTP server listens on
127.0.0.1 with a free port. Tests that only read share one busy node (``busy``, built once per
session: a daemon takes about two seconds to stop); tests that change the node start their own
(``observed``).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hcs_deviceplugin.daemon import Daemon, DaemonConfig, DaemonView
from hcs_deviceplugin.model import Health, HealthEvent
from hcs_deviceplugin.observability.http import ObservabilityServer
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from tests.integration.conftest import H100, WAIT, Node, card_pool, fresh_node, pool_doc, resource

NODE_NAME = "node-1"
HTTP_TIMEOUT = 5.0
ABSENT = {"ascend": "libdcmi.so: cannot open shared object file"}
MIB = 1024 * 1024
H100_BYTES = 81559 * MIB

Sample = tuple[str, dict[str, str], float]


@dataclass
class Observed:
    """A running daemon on the simulated node, its Metrics and its HTTP server."""

    node: Node
    daemon: Daemon
    metrics: Metrics
    server: ObservabilityServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def get(self, path: str) -> tuple[int, str]:
        """Status and body of GET ``path``; error statuses are returned, not raised."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=HTTP_TIMEOUT) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def samples(self) -> list[Sample]:
        """Every sample of one ``/metrics`` scrape, parsed by prometheus-client's own parser."""
        status, text = self.get("/metrics")
        assert status == 200, text
        return parse_samples(text)


def parse_samples(text: str) -> list[Sample]:
    return [
        (s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(text) for s in f.samples
    ]


def scrape(metrics: Metrics) -> list[Sample]:
    """The registry's exposition without HTTP, parsed like a scrape."""
    return parse_samples(metrics.registry.exposition().decode())


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The one sample called ``name`` whose labels include ``labels``."""
    found = [v for n, ls, v in samples if n == name and labels.items() <= ls.items()]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


def start_observed(
    node: Node,
    pools: str,
    servers: list[ObservabilityServer],
    absent_backends: dict[str, str] | None = None,
    kubelet_running: bool = True,
) -> Observed:
    """Write ``pools`` and start daemon and HTTP server; with ``kubelet_running=False`` the kubelet
    simulator is stopped first, so every pool keeps retrying Register until it is started again."""
    if not kubelet_running:
        node.kubelet.stop()
    node.write_pools(pools)
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=node.plugin_dir,
            node_name=NODE_NAME,
            backend_retry=Backoff(initial=0.05, maximum=0.2),
            registration_backoff=Backoff(initial=0.02, maximum=0.2),
            pod_resources_socket=node.root / "pr.sock",
            pod_resources_interval=0.1,
            allocation_settle_seconds=0.3,
        ),
        {node.backend.name: node.backend},
        absent_backends=absent_backends,
    )
    daemon.add_source(lambda on_change: DirectoryPoolSource(node.pools_dir, on_change))
    node.daemon = daemon
    daemon.start()
    metrics = Metrics()
    server = ObservabilityServer(daemon, metrics, host="127.0.0.1", port=0, links=node.backend.links)
    servers.append(server)
    server.start()
    return Observed(node, daemon, metrics, server)


Start = Callable[..., Observed]


@pytest.fixture
def observed() -> Iterator[Start]:
    """``start(pools_yaml, absent_backends=None, kubelet_running=True)``: a node, its daemon and HTTP
    server; all torn down after the test."""
    servers: list[ObservabilityServer] = []
    with fresh_node() as node:
        try:
            yield lambda pools, absent_backends=None, kubelet_running=True: start_observed(
                node, pools, servers, absent_backends, kubelet_running
            )
        finally:
            for server in servers:
                server.stop()


@dataclass
class Busy:
    """The shared node: which card kubelet allocated from pool a, which is free, which is sick."""

    obs: Observed
    held_card: str
    free_card: str
    sick_card: str


def make_busy(obs: Observed) -> Busy:
    """Pool a: two exclusive H100s, one allocated. Pool b: one H100 as 2 time-slices, made Unhealthy."""
    obs.node.wait_registered("a", "b")
    record = obs.node.kubelet.allocate("trainer", "main", resource("a"), 1)
    held_card = record.device_ids[0]
    free_card = H100[1] if held_card == H100[0] else H100[0]
    obs.daemon.wait_for(lambda v: held_card in v.held, WAIT, "allocation held")
    sick_card = H100[2]
    obs.node.backend.inject(HealthEvent(sick_card, Health.UNHEALTHY, "XID 79"))

    def sick(v: DaemonView) -> bool:
        return all(u.health is Health.UNHEALTHY for u in v.pools["b"].units)

    obs.daemon.wait_for(sick, WAIT, "pool b unhealthy")
    return Busy(obs, held_card, free_card, sick_card)


BUSY_POOLS = pool_doc(card_pool("a", H100[0], H100[1]), card_pool("b", H100[2], slicesPerUnit=2))


@pytest.fixture(scope="session")
def busy() -> Iterator[Busy]:
    """One busy node for every test that only reads it (do not change its pools, pods or health)."""
    servers: list[ObservabilityServer] = []
    with fresh_node() as node:
        try:
            yield make_busy(start_observed(node, BUSY_POOLS, servers, ABSENT))
        finally:
            for server in servers:
                server.stop()
