"""Restart safety: until pod-resources has answered once, a card goes only where it last was.

A daemon is stopped (as SIGTERM would: no drain) and a new one started on the same state dir with
pod-resources unreachable (its socket path is a link we create only later). Meanwhile the ConfigMap
moved a held card to another pool. The new daemon must not advertise that card in its new pool
until pod-resources says who holds it; a card it has no record of waits too.
"""

from __future__ import annotations

from pathlib import Path

from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


def start(node: Node, pod_resources: Path) -> Daemon:
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=node.plugin_dir,
            node_name="node-1",
            registration_backoff=Backoff(initial=0.02, maximum=0.2),
            pod_resources_socket=pod_resources,
            pod_resources_interval=0.1,
            allocation_settle_seconds=0.3,
            state_dir=node.root / "state",
            initial_pod_resources_wait=0.2,
        ),
        {node.backend.name: node.backend},
    )
    daemon.add_source(lambda on_change: DirectoryPoolSource(node.pools_dir, on_change))
    daemon.start()
    node.daemon = daemon
    return daemon


def advertised(node: Node, pool: str) -> frozenset[str]:
    name = resource(pool)
    resources = node.kubelet.resources()
    if name not in resources:
        return frozenset()
    view = resources[name]
    return view.healthy | view.unhealthy


def test_held_card_moved_while_down_stays_out_of_its_new_pool_until_confirmed(node: Node) -> None:
    real = node.root / "pr.sock"
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    first = start(node, real)
    node.wait_registered("a", "b")
    node.kubelet.allocate("job", "main", resource("a"), 1)
    first.wait_for(lambda v: H100[0] in v.held, WAIT, "held")
    first.stop()
    node.daemon = None

    node.write_pools(pool_doc(card_pool("b", H100[0], H100[1]), card_pool("c", H100[2])))
    link = node.root / "pr-later.sock"  # pod-resources unreachable for the new daemon
    second = start(node, link)
    view = second.wait_for(lambda v: "b" in v.pools and "c" in v.pools, WAIT, "pools served")
    assert view.awaiting == {H100[2]: "c"}  # never advertised before: waits for pod-resources
    assert H100[0] in view.draining  # last advertised under a: not in b without a confirmed read
    node.wait_registered("b")
    assert H100[0] not in advertised(node, "b")
    assert advertised(node, "c") == frozenset()

    link.symlink_to(real)  # pod-resources answers: card 0 is still held under a
    view = second.wait_for(lambda v: not v.awaiting, WAIT, "pod-resources read")
    assert H100[0] in view.draining
    assert H100[0] not in {u.card_id for u in view.pools["b"].units}
    node.kubelet.wait_for(lambda k: advertised(node, "c") == {H100[2]}, WAIT, "unrecorded card served")

    node.kubelet.free_pod("job")
    node.kubelet.wait_for(lambda k: H100[0] in advertised(node, "b"), WAIT, "released card joins b")


def test_without_a_state_file_nothing_is_served_before_the_first_read(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0])))
    link = node.root / "pr-later.sock"
    daemon = start(node, link)
    node.wait_registered("a")
    assert daemon.view().awaiting == {H100[0]: "a"}
    assert advertised(node, "a") == frozenset()
    link.symlink_to(node.root / "pr.sock")
    node.kubelet.wait_for(lambda k: advertised(node, "a") == {H100[0]}, WAIT, "served after the read")


def test_the_state_file_records_where_cards_are_advertised(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1], slicesPerUnit=2)))
    start(node, node.root / "pr.sock")
    node.wait_registered("a", "b")
    text = (node.root / "state" / "state.json").read_text()
    assert f'"{H100[0]}": {{"resource": "{resource("a")}", "units": ["{H100[0]}"]}}' in text
    assert f'"units": ["{H100[1]}::0", "{H100[1]}::1"]' in text
