"""A card held by a running container is never advertised anywhere else until it is released."""

from __future__ import annotations

from hcs_deviceplugin.daemon import DaemonView
from tests.integration.conftest import H100, WAIT, Node, card_pool, pool_doc, resource


def advertised_cards(node: Node) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, view in node.kubelet.resources().items():
        for unit_id in view.healthy | view.unhealthy:
            out.setdefault(unit_id.split("::")[0], set()).add(name)
    return out


def test_held_card_drains_and_joins_its_new_pool_when_released(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0], H100[1]), card_pool("b", H100[2])))
    daemon = node.start_daemon()
    node.wait_registered("a", "b")
    record = node.kubelet.allocate("trainer", "main", resource("a"), 1)
    held_card = record.device_ids[0]
    daemon.wait_for(lambda v: held_card in v.held, WAIT, "held card known from pod-resources")

    others = [c for c in (H100[0], H100[1]) if c != held_card]
    node.write_pools(pool_doc(card_pool("a", *others), card_pool("b", H100[2], held_card)))
    view = daemon.wait_for(lambda v: held_card in v.draining, WAIT, "draining")
    assert view.draining[held_card] == (resource("a"), "b")
    assert held_card not in {u.card_id for u in view.pools["b"].units}
    assert held_card not in {u.card_id for u in view.pools["a"].units}
    node.kubelet.wait_for(
        lambda k: held_card not in k.resource(resource("a")).healthy, WAIT, "withdrawn from a"
    )
    assert advertised_cards(node).get(held_card) is None

    node.kubelet.free_pod("trainer")

    def joined(v: DaemonView) -> bool:
        return held_card in {u.card_id for u in v.pools["b"].units}

    daemon.wait_for(joined, WAIT, "released card joins b")
    node.kubelet.wait_for(lambda k: held_card in k.resource(resource("b")).healthy, WAIT, "b advertises it")
    assert advertised_cards(node)[held_card] == {resource("b")}


def test_exclusive_holder_blocks_switching_its_card_to_time_slicing(node: Node) -> None:
    node.write_pools(pool_doc(card_pool("a", H100[0])))
    daemon = node.start_daemon()
    node.wait_registered("a")
    node.kubelet.allocate("exclusive", "main", resource("a"), 1)
    daemon.wait_for(lambda v: H100[0] in v.held, WAIT, "held")
    node.write_pools(pool_doc(card_pool("a", H100[0], slicesPerUnit=4)))
    view = daemon.wait_for(lambda v: H100[0] in v.draining, WAIT, "draining while held exclusively")
    assert view.pools["a"].units == ()
    node.kubelet.free_pod("exclusive")
    node.kubelet.wait_for(
        lambda k: k.resource(resource("a")).healthy == {f"{H100[0]}::{n}" for n in range(4)}, WAIT, "sliced"
    )
