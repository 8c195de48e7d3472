"""``Daemon.wait_streaming``: what ``run`` waits on before it builds its HTTP server."""

from __future__ import annotations

import threading

from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


def test_true_once_every_pool_has_registered_and_streams(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    daemon = node.start_daemon()
    assert daemon.wait_streaming(WAIT)
    assert {resource("a"), resource("b")} <= set(node.kubelet.resources()), "kubelet has both already"
    assert all(pool.server.open_streams > 0 for pool in daemon.view().pools.values())


def test_false_while_a_pool_cannot_register_and_at_once_when_the_daemon_stops(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0])))
    daemon = node.start_daemon()
    assert daemon.wait_streaming(WAIT)
    node.kubelet.stop()
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    daemon.wait_for(lambda v: "b" in v.pools, WAIT, "pool b served (kubelet is down: not registered)")
    assert not daemon.wait_streaming(0.05), "b cannot register while kubelet is down"

    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(daemon.wait_streaming(60.0)), daemon=True)
    waiter.start()
    daemon.stop()
    waiter.join(WAIT)
    assert answers == [False], "a stopping daemon ends the wait, not its 60 s timeout"
