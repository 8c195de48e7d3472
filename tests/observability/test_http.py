"""``/healthz`` and ``/readyz`` over HTTP, and the liveness rules on their own."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Mapping

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.observability.probes import LivenessProbe, alive
from hcs_deviceplugin.plugin.server import RegistrationStatus
from tests.integration.conftest import H100, WAIT, card_pool, pool_doc
from tests.observability.conftest import Busy, Start


def test_healthz_and_readyz_are_ok_on_a_registered_node(busy: Busy) -> None:
    assert busy.obs.get("/healthz") == (200, "ok\n")
    assert busy.obs.get("/readyz") == (200, "ok\n")


def test_metrics_content_type_and_unknown_paths(busy: Busy) -> None:
    status, body = busy.obs.get("/nope")
    assert status == 404 and "/metrics" in body
    with urllib.request.urlopen(busy.obs.url + "/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")


def test_readyz_names_the_pool_that_cannot_register_until_kubelet_is_back(observed: Start) -> None:
    obs = observed(pool_doc(card_pool("a", H100[0]), card_pool("team-b", H100[1])), kubelet_running=False)

    def retrying(v: DaemonView) -> bool:
        return all(
            p.server.status is RegistrationStatus.RETRYING and p.server.last_error for p in v.pools.values()
        )

    obs.daemon.wait_for(retrying, WAIT, "registration retrying")
    status, body = obs.get("/readyz")
    assert status == 503
    lines = body.splitlines()
    assert [line.split(": ")[:2] for line in lines[:2]] == [
        ["pool a", "registration retrying"],
        ["pool team-b", "registration retrying"],
    ]
    assert all(len(line.split(": ", 2)[2]) > 0 for line in lines[:2]), "last error given"
    # No kubelet, so no pod-resources either: nothing may be advertised before its first answer.
    assert lines[2].startswith("2 card(s) held back until pod-resources answers: ")
    assert "pr.sock does not exist" in lines[2]
    assert len(lines) == 3
    assert obs.get("/healthz") == (200, "ok\n")  # kubelet being down is no reason to restart us

    obs.node.kubelet.start()
    obs.daemon.wait_for(lambda v: v.all_registered() and not v.awaiting, WAIT, "registered and read")
    assert obs.get("/readyz") == (200, "ok\n")


def test_readyz_lists_config_errors_one_per_line(observed: Start) -> None:
    obs = observed(pool_doc(card_pool("a", H100[0])))
    obs.node.wait_registered("a")
    obs.node.write_pools("version: v1\npools:\n  - name: a\n    slicesPerUnit: 100\n    devices: []\n")
    view = obs.daemon.wait_for(lambda v: bool(v.config_errors), WAIT, "config error reported")
    status, body = obs.get("/readyz")
    assert status == 503
    lines = body.splitlines()
    assert len(lines) == len(view.config_errors)
    assert all(line.startswith("config: ") for line in lines)
    assert "slicesPerUnit" in body
    assert obs.get("/healthz") == (200, "ok\n")  # the last good pools are still served


class _FakeDaemon:
    """Just enough daemon for the liveness probe: a view that may block, thread states."""

    def __init__(self, view: DaemonView, threads: Mapping[str, bool] | None = None) -> None:
        self._view = view
        self._threads = dict(threads or {})
        self.release = threading.Event()
        self.release.set()

    def view(self) -> DaemonView:
        self.release.wait()
        return self._view

    def thread_liveness(self) -> Mapping[str, bool]:
        return self._threads


def test_liveness_fails_when_the_state_lock_is_never_released(busy: Busy) -> None:
    fake = _FakeDaemon(busy.obs.daemon.view())
    probe = LivenessProbe(fake, timeout=0.05)
    assert probe.check() == (True, "ok")
    fake.release.clear()
    ok, reason = probe.check()
    assert not ok and "not readable within 0.05s" in reason
    ok, reason = probe.check()  # no second helper thread while the first is still stuck
    assert not ok and "earlier probe" in reason
    fake.release.set()
    assert probe.check() == (True, "ok")


def test_liveness_names_dead_daemon_threads(busy: Busy) -> None:
    fake = _FakeDaemon(busy.obs.daemon.view(), {"daemon-control": False, "health-simulated": True})
    assert alive(fake, timeout=1.0) == (False, "daemon thread(s) not running: daemon-control")
