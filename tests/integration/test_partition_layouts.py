"""Partition pools lay out free cards through the backend, and never a card someone holds."""

from __future__ import annotations

from hcs_deviceplugin.daemon import DaemonView
from tests.integration.conftest import H100, WAIT, Node, pool_doc, resource

MIG_CARD = H100[3]  # MIG-capable in the default node, starting with two 1g.10gb partitions


def mig_pool(name: str, profile: str) -> dict[str, object]:
    return {"name": name, "unit": "Partition", "profile": profile, "devices": [{"uuid": MIG_CARD}]}


def test_pool_profile_change_relayouts_the_card_once_it_is_free(node: Node) -> None:
    node.write_pools(pool_doc(mig_pool("mig", "1g.10gb")))
    daemon = node.start_daemon()
    node.wait_registered("mig")
    small = node.kubelet.resource(resource("mig")).healthy
    assert len(small) == 2, "the two existing 1g.10gb partitions, untouched"
    node.kubelet.allocate("inference", "main", resource("mig"), 1)
    daemon.wait_for(lambda v: MIG_CARD in v.held, WAIT, "held known")

    node.write_pools(pool_doc(mig_pool("mig", "3g.40gb")))
    view = daemon.wait_for(lambda v: MIG_CARD in v.draining, WAIT, "draining: a 1g.10gb is in use")
    assert view.pools["mig"].units == ()
    assert not any(p.profile == "3g.40gb" for p in node.backend.discover().partitions), "held card untouched"

    node.kubelet.free_pod("inference")

    def laid_out(v: DaemonView) -> bool:
        return len(v.pools["mig"].units) == 2

    daemon.wait_for(laid_out, WAIT, "card laid out as 2 x 3g.40gb after release")
    node.kubelet.wait_for(lambda k: len(k.resource(resource("mig")).healthy) == 2, WAIT, "kubelet sees them")
    profiles = {p.profile for p in node.backend.discover().partitions if p.card_id == MIG_CARD}
    assert "3g.40gb" in profiles


def test_profile_the_card_does_not_have_is_reported_not_retried(node: Node) -> None:
    node.write_pools(pool_doc(mig_pool("mig", "9g.99gb"), {"name": "plain", "devices": [{"uuid": H100[0]}]}))
    daemon = node.start_daemon()
    node.wait_registered("mig", "plain")
    view = daemon.wait_for(lambda v: bool(v.layout_errors), WAIT, "layout error")
    (message,) = view.layout_errors
    assert "pool mig" in message and MIG_CARD in message and "9g.99gb" in message
    assert view.pools["mig"].units == () and len(view.pools["plain"].units) == 1
