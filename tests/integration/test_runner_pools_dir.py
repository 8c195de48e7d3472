"""A missing ``--pools-dir`` is never created: an error without an API source, optional with one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hcs_deviceplugin.cli import DEFAULT_LABEL_SELECTOR
from hcs_deviceplugin.kubeapi.settings import ApiSettings
from hcs_deviceplugin.runner import Runner, RunSettings, StartError
from tests.integration.conftest import H100, WAIT, card_pool, pool_doc
from tests.pools.fakeapiserver import FakeApiServer

NAMESPACE = "hcs-system"
CHART_LABELS = {"app.kubernetes.io/name": "hcs-deviceplugin", "app.kubernetes.io/component": "pools"}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApiServer]:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with FakeApiServer() as srv:
        yield srv


def settings(root: Path, api: ApiSettings | None = None) -> RunSettings:
    return RunSettings(
        plugin_dir=root / "dp",
        pools_dir=root / "pools",
        host_root=root,
        vendors=("simulated",),
        node_name="node-1",
        pod_resources_socket=None,
        pod_resources_interval=5.0,
        state_dir=root / "state",
        metrics_address="127.0.0.1",
        metrics_port=0,
        api=api,
    )


def kubeconfig(root: Path, server: FakeApiServer) -> Path:
    path = root / "kubeconfig"
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{server.port}"}}}}]
users: [{{name: daemon, user: {{token: t}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: daemon}}}}]
current-context: fake
"""
    )
    return path


def test_without_an_api_source_a_missing_pools_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StartError, match=r"--pools-dir .*/pools: no such directory"):
        Runner(settings(tmp_path))
    assert not (tmp_path / "pools").exists()


def test_with_an_api_source_the_pools_come_from_the_api_and_no_directory_is_made(
    tmp_path: Path, server: FakeApiServer
) -> None:
    """The chart's pools ConfigMap, found by the CLI's default selector, with no mount at all."""
    server.put_configmap(
        NAMESPACE,
        "hcs-deviceplugin-pools",
        {"pools.yaml": pool_doc(card_pool("train", H100[0]))},
        CHART_LABELS,
    )
    api = ApiSettings(NAMESPACE, DEFAULT_LABEL_SELECTOR, kubeconfig=kubeconfig(tmp_path, server))
    runner = Runner(settings(tmp_path, api))
    runner.start()
    try:
        view = runner.daemon.wait_for(lambda v: "train" in v.wanted_pools, WAIT, "the API's pool")
        assert not view.config_errors
        assert not (tmp_path / "pools").exists()
    finally:
        runner.stop()
