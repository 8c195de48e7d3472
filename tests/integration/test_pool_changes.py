"""Live pool changes from the mounted directory touch only the pools they change."""

from __future__ import annotations

from hcs_deviceplugin.model import Health
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


def sockets(node: Node) -> set[str]:
    return {p.name for p in node.plugin_dir.iterdir() if p.name.startswith("hcs-")}


def counters(node: Node, pool: str) -> tuple[int, int]:
    view = node.kubelet.resource(resource(pool))
    return (view.registrations, view.stream_opens)


def test_add_remove_move_and_break(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    daemon = node.start_daemon()
    node.wait_registered("a", "b")
    assert sockets(node) == {"hcs-gpu.deckhouse.io_a.sock", "hcs-gpu.deckhouse.io_b.sock"}
    a0, b0 = counters(node, "a"), counters(node, "b")
    server_a = daemon.server("a")

    # Add a pool: only its socket appears; the others keep their registration and stream.
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1]), card_pool("c", H100[2])))
    node.wait_registered("c")
    assert sockets(node) == {f"hcs-gpu.deckhouse.io_{p}.sock" for p in "abc"}
    assert counters(node, "a") == a0 and counters(node, "b") == b0

    # Move a card from c to b: b's stream gets a new list, a is untouched.
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1], H100[2]), card_pool("c")))
    node.kubelet.wait_for(lambda k: k.resource(resource("b")).healthy == {H100[1], H100[2]}, WAIT, "move")
    node.kubelet.wait_for(lambda k: not k.resource(resource("c")).healthy, WAIT, "c empty")
    assert counters(node, "a") == a0 and counters(node, "b") == b0
    assert daemon.server("a") is server_a

    # Remove a pool: its socket is gone and kubelet saw an empty list before the stream closed.
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1], H100[2])))
    daemon.wait_for(lambda v: "c" not in v.pools, WAIT, "pool c removed")
    assert sockets(node) == {"hcs-gpu.deckhouse.io_a.sock", "hcs-gpu.deckhouse.io_b.sock"}
    node.kubelet.wait_for(lambda k: not k.resource(resource("c")).connected, WAIT, "c stream closed")
    assert counters(node, "a") == a0 and counters(node, "b") == b0

    # Break the YAML: last good pools stay, the error names the file and field.
    node.write_pools("version: v1\npools:\n  - name: a\n    slicesPerUnit: 100\n    devices: []\n")
    view = daemon.wait_for(lambda v: bool(v.config_errors), WAIT, "config error reported")
    assert any("pools.yaml" in e and "pools[0].slicesPerUnit" in e for e in view.config_errors), (
        view.config_errors
    )
    assert set(view.pools) == {"a", "b"}
    assert {u.id for u in view.pools["b"].units} == {H100[1], H100[2]}
    node.write_pools(": not yaml : [\n")
    view = daemon.wait_for(lambda v: any("line" in e for e in v.config_errors), WAIT, "syntax error")
    assert set(view.pools) == {"a", "b"}
    assert counters(node, "a") == a0 and counters(node, "b") == b0
    assert all(u.health is Health.HEALTHY for u in view.pools["a"].units)

    # Fixing the file clears the error and applies.
    node.write_pools(pool_doc(card_pool("a", H100[0], H100[3])))
    daemon.wait_for(lambda v: not v.config_errors and set(v.pools) == {"a"}, WAIT, "fixed")
    node.kubelet.wait_for(lambda k: k.resource(resource("a")).healthy == {H100[0], H100[3]}, WAIT, "a grown")
    assert counters(node, "a") == a0


def test_changing_slices_replaces_only_that_server(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    daemon = node.start_daemon()
    node.wait_registered("a", "b")
    a0, b0 = counters(node, "a"), counters(node, "b")
    node.write_pools(pool_doc(card_pool("a", H100[0], slicesPerUnit=2), card_pool("b", H100[1])))
    node.kubelet.wait_for(
        lambda k: (
            k.resource(resource("a")).healthy == {f"{H100[0]}::0", f"{H100[0]}::1"}
            and k.resource(resource("a")).connected
        ),
        WAIT,
        "a served with replicas",
    )
    assert counters(node, "a")[0] == a0[0] + 1
    assert counters(node, "b") == b0
    assert daemon.view().pools["a"].pool.slices_per_unit == 2


def test_card_in_two_pools_goes_to_neither_new_claimant(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    daemon = node.start_daemon()
    node.wait_registered("a", "b")
    node.write_pools(
        pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1], H100[0]), card_pool("c", H100[2], H100[1]))
    )
    view = daemon.wait_for(lambda v: "c" in v.pools, WAIT, "pool c")
    assert view.conflicts == {H100[0]: ("a", "b"), H100[1]: ("b", "c")}
    assert [u.id for u in view.pools["a"].units] == [H100[0]]
    assert [u.id for u in view.pools["b"].units] == [H100[1]]
    assert [u.id for u in view.pools["c"].units] == [H100[2]]


def test_a_compatibility_resource_name_registers_and_allocates_under_that_name(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("legacy", H100[0], H100[1], resourceName="nvidia.com/gpu")))
    node.start_daemon()
    node.kubelet.wait_for(
        lambda k: "nvidia.com/gpu" in k.resources() and k.resource("nvidia.com/gpu").connected,
        WAIT,
        "nvidia.com/gpu registered",
    )
    assert node.kubelet.resource("nvidia.com/gpu").healthy == {H100[0], H100[1]}
    assert node.kubelet.allocate("p", "c", "nvidia.com/gpu", 2).device_ids
