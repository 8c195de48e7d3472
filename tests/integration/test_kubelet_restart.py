"""Kubelet restarts are survived: every pool re-registers, allocations are unchanged."""

from __future__ import annotations

from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource

POOLS = ("train", "shared")


def test_twenty_kubelet_restarts(node: Node) -> None:
    node.write_pools(
        pool_doc(card_pool("train", H100[0], H100[1]), card_pool("shared", H100[2], slicesPerUnit=4))
    )
    node.start_daemon()
    node.wait_registered(*POOLS)
    node.kubelet.allocate("trainer", "main", resource("train"), 1)
    node.kubelet.allocate("svc", "main", resource("shared"), 2)
    allocations = sorted((a.key, a.device_ids) for a in node.kubelet.allocations())
    expected_units = {
        p: node.kubelet.resource(resource(p)).healthy | node.kubelet.resource(resource(p)).unhealthy
        for p in POOLS
    }

    for round_ in range(1, 21):
        before = {p: node.kubelet.resource(resource(p)).registrations for p in POOLS}
        node.kubelet.restart()
        node.kubelet.wait_for(
            lambda k, before=before: all(  # type: ignore[misc]
                k.resource(resource(p)).registrations > before[p]
                and k.resource(resource(p)).connected
                and k.resource(resource(p)).healthy == expected_units[p]
                for p in POOLS
            ),
            WAIT,
            f"every pool re-registered after restart {round_}",
        )
        assert sorted((a.key, a.device_ids) for a in node.kubelet.allocations()) == allocations

    # After the restarts, allocation still works and does not hand out what is already held.
    held = {d for a in node.kubelet.allocations() for d in a.device_ids}
    record = node.kubelet.allocate("late", "main", resource("train"), 1)
    assert not set(record.device_ids) & held


def test_plugin_registers_once_kubelet_appears(node: Node) -> None:
    node.kubelet.stop()
    node.write_pools(pool_doc(card_pool("train", H100[0])))
    daemon = node.start_daemon()
    view = daemon.wait_for(
        lambda v: v.pools["train"].server.last_error != "", WAIT, "registration failing without kubelet"
    )
    assert (
        "kubelet" in view.pools["train"].server.last_error
        or "does not exist" in view.pools["train"].server.last_error
    )
    node.kubelet.start()
    node.wait_registered("train")
    # No pod-resources either until kubelet came: the card waited for its first read (restart
    # safety), and joins the pool's stream right after it.
    node.kubelet.wait_for(
        lambda k: k.resource(resource("train")).healthy == {H100[0]}, WAIT, "card advertised"
    )


def test_removed_plugin_socket_is_recreated_and_registered_again(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("train", H100[0])))
    node.start_daemon()
    node.wait_registered("train")
    before = node.kubelet.resource(resource("train")).registrations
    (node.plugin_dir / "hcs-gpu.deckhouse.io_train.sock").unlink()
    node.kubelet.wait_for(
        lambda k: k.resource(resource("train")).registrations > before,
        WAIT,
        "re-registration after socket removal",
    )
    assert (node.plugin_dir / "hcs-gpu.deckhouse.io_train.sock").is_socket()
