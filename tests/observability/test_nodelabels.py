"""Node labels: the pure label function as a table, the labeler against a local apiserver, the wiring.

The labeler is tested on the wire (``tests.pools.fakeapiserver`` validates label keys and values as the
apiserver does), and every wait is on a condition: a request recorded by the server or a round the
labeler reports finished, never a sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hcs_deviceplugin import cli
from hcs_deviceplugin.kubeapi.client import KubeClient
from hcs_deviceplugin.kubeapi.config import ClusterConfig
from hcs_deviceplugin.kubeapi.settings import ApiSettings
from hcs_deviceplugin.model import Card, Health, HealthEvent
from hcs_deviceplugin.observability.nodelabels import (
    NodeLabeler,
    is_label_key,
    label_value,
    node_labels,
)
from hcs_deviceplugin.runner import Runner, RunSettings
from tests.integration.conftest import H100 as H100_IDS
from tests.integration.conftest import card_pool, pool_doc
from tests.observability.conftest import scrape, value
from tests.pools.fakeapiserver import FakeApiServer, is_node_patch, is_node_read, label_errors

NODE = "k8s-w1.gpu.example.ru"
TIMEOUT = 5.0
P = "hcs.deckhouse.io/"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
ASCEND = "Ascend 910B3"


def card(n: int, vendor: str = "nvidia", model: str = H100, health: Health = Health.HEALTHY) -> Card:
    return Card(id=f"{vendor}-{n}", backend=vendor, vendor=vendor, model=model, index=n, health=health)


# --- the pure function ---------------------------------------------------------------------------------

LABEL_CASES: dict[str, tuple[list[Card], dict[str, str]]] = {
    "no cards": ([], {}),
    "one vendor": (
        [card(0), card(1)],
        {
            f"{P}nvidia.present": "true",
            f"{P}nvidia.count": "2",
            f"{P}nvidia.product": "NVIDIA-H100-80GB-HBM3",
            "gpu-type": "NVIDIA-H100-80GB-HBM3",
        },
    ),
    "mixed vendors: gpu-type is the node's most common model": (
        [card(0), card(1, "ascend", ASCEND), card(2, "ascend", ASCEND), card(3, "ascend", ASCEND)],
        {
            f"{P}ascend.present": "true",
            f"{P}ascend.count": "3",
            f"{P}ascend.product": "Ascend-910B3",
            f"{P}nvidia.present": "true",
            f"{P}nvidia.count": "1",
            f"{P}nvidia.product": "NVIDIA-H100-80GB-HBM3",
            "gpu-type": "Ascend-910B3",
        },
    ),
    "unhealthy cards are left out of the count, not of the product": (
        [card(0, health=Health.UNHEALTHY), card(1), card(2, "hygon", "K100_AI", Health.UNHEALTHY)],
        {
            f"{P}hygon.present": "true",
            f"{P}hygon.count": "0",
            f"{P}hygon.product": "K100_AI",
            f"{P}nvidia.present": "true",
            f"{P}nvidia.count": "1",
            f"{P}nvidia.product": "NVIDIA-H100-80GB-HBM3",
            "gpu-type": "NVIDIA-H100-80GB-HBM3",
        },
    ),
    "the most common model of a vendor; a tie goes to the first in order": (
        [card(0, model=H100), card(1, model=A100), card(2, model=A100), card(3, "x", "B"), card(4, "x", "A")],
        {
            f"{P}nvidia.present": "true",
            f"{P}nvidia.count": "3",
            f"{P}nvidia.product": "NVIDIA-A100-SXM4-80GB",
            f"{P}x.present": "true",
            f"{P}x.count": "2",
            f"{P}x.product": "A",
            "gpu-type": "NVIDIA-A100-SXM4-80GB",
        },
    ),
    "spellings that make one value count together": (
        [card(0, model="H100 PCIe"), card(1, model="H100-PCIe"), card(2, model="A100")],
        {
            f"{P}nvidia.present": "true",
            f"{P}nvidia.count": "3",
            f"{P}nvidia.product": "H100-PCIe",
            "gpu-type": "H100-PCIe",
        },
    ),
    "a model with nothing usable gets no product": (
        [card(0, model="??")],
        {f"{P}nvidia.present": "true", f"{P}nvidia.count": "1"},
    ),
}


@pytest.mark.parametrize("case", LABEL_CASES)
def test_node_labels(case: str) -> None:
    cards, expected = LABEL_CASES[case]
    labels = node_labels(cards)
    assert labels == expected
    assert label_errors(labels) == [], "every label must be one the apiserver accepts"


def test_node_labels_prefix_and_gpu_type_key() -> None:
    labels = node_labels([card(0)], prefix="example.com/", gpu_type_key="example.com/accelerator")
    assert labels == {
        "example.com/nvidia.present": "true",
        "example.com/nvidia.count": "1",
        "example.com/nvidia.product": "NVIDIA-H100-80GB-HBM3",
        "example.com/accelerator": "NVIDIA-H100-80GB-HBM3",
    }


VALUE_CASES = {
    "spaces": ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
    "kept as is": ("MLU370-X8", "MLU370-X8"),
    "underscore and dot kept": ("K100_AI v1.2", "K100_AI-v1.2"),
    "runs of other characters become one dash": ("Tesla  V100 (SXM2) / 32GB", "Tesla-V100-SXM2-32GB"),
    "non-ASCII letters are not label characters": ("Ускоритель X1", "X1"),
    "trimmed to alphanumerics": ("-_.H100._-", "H100"),
    "nothing usable": ("?? ", ""),
    "empty": ("", ""),
    "63 characters": ("a" * 70, "a" * 63),
    "a cut that ends on a dash is trimmed": ("a" * 62 + " b", "a" * 62),
}


@pytest.mark.parametrize("case", VALUE_CASES)
def test_label_value(case: str) -> None:
    text, expected = VALUE_CASES[case]
    value = label_value(text)
    assert value == expected
    assert label_errors({"k": value}) == []


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("gpu-type", True),
        ("example.com/gpu-type", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("", False),
        ("Example.com/gpu", False),
        ("/gpu", False),
        ("gpu type", False),
        ("-gpu", False),
        ("a/b/c", False),
    ],
)
def test_is_label_key(key: str, valid: bool) -> None:
    assert is_label_key(key) is valid
    assert (label_errors({key: "v"}) == []) is valid, "agrees with the apiserver's check"


def test_vendor_names_are_made_valid_key_names() -> None:
    labels = node_labels([card(0, vendor="Big Vendor" + "x" * 60)])
    assert label_errors(labels) == []
    assert all(len(key.removeprefix(P)) <= 63 for key in labels)


UNUSED_CLIENT = KubeClient(ClusterConfig(server="http://127.0.0.1:1"))
"""A client the checks at construction never get to use."""


def test_a_bad_prefix_or_key_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="prefix"):
        NodeLabeler(UNUSED_CLIENT, NODE, Cards, label_prefix="hcs.deckhouse.io")
    with pytest.raises(ValueError, match="label key"):
        NodeLabeler(UNUSED_CLIENT, NODE, Cards, gpu_type_key="gpu type")


# --- the labeler on the wire ---------------------------------------------------------------------------


@dataclass
class Cards:
    """A daemon view a test can change between rounds."""

    cards: tuple[Card, ...] = ()


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[KubeClient]:
    with server.api_client() as client:
        yield client


LabelerFactory = Callable[..., NodeLabeler]


@pytest.fixture
def make_labeler(api: KubeClient) -> Iterator[LabelerFactory]:
    """``make(view, **kwargs)``: a started labeler for NODE; a long interval unless given, so rounds
    run only when a test pokes."""
    labelers: list[NodeLabeler] = []

    def make(view: Cards, **kwargs: object) -> NodeLabeler:
        kwargs.setdefault("interval", 3600.0)
        labeler = NodeLabeler(api, NODE, lambda: view, **kwargs)  # type: ignore[arg-type]
        labelers.append(labeler)
        labeler.start()
        return labeler

    yield make
    for labeler in labelers:
        labeler.stop()


def next_round(labeler: NodeLabeler) -> None:
    """Run a round that sees the view as it is now, and wait until it has finished."""
    assert labeler.sync(TIMEOUT)


def patches(server: FakeApiServer) -> list[dict[str, str | None]]:
    return [r.body["metadata"]["labels"] for r in server.requests(is_node_patch)]


OTHERS = {"kubernetes.io/hostname": NODE, "node.deckhouse.io/group": "gpu", "team": "a"}
TWO_VENDORS = (card(0), card(1), card(2, "ascend", ASCEND))
TWO_VENDORS_LABELS = {
    f"{P}ascend.present": "true",
    f"{P}ascend.count": "1",
    f"{P}ascend.product": "Ascend-910B3",
    f"{P}nvidia.present": "true",
    f"{P}nvidia.count": "2",
    f"{P}nvidia.product": "NVIDIA-H100-80GB-HBM3",
    "gpu-type": "NVIDIA-H100-80GB-HBM3",
}


def test_first_patch_sets_ours_removes_stale_ones_and_leaves_the_rest(
    server: FakeApiServer, make_labeler: LabelerFactory
) -> None:
    stale = {f"{P}hygon.present": "true", f"{P}hygon.count": "2", "gpu-type": "K100_AI"}
    server.put_node(NODE, {**OTHERS, **stale, f"{P}nvidia.present": "true"})
    labeler = make_labeler(Cards(TWO_VENDORS))
    (request,) = server.wait_requests(is_node_patch, 1, TIMEOUT)
    assert labeler.wait_rounds(1, TIMEOUT)
    assert request.path == f"/api/v1/nodes/{NODE}"
    assert request.content_type == "application/strategic-merge-patch+json"
    assert request.body == {
        "metadata": {
            "labels": {
                **{k: v for k, v in TWO_VENDORS_LABELS.items() if k != f"{P}nvidia.present"},
                f"{P}hygon.present": None,
                f"{P}hygon.count": None,
            }
        }
    }, "what the Node already carries is not sent again; stale owned labels are nulled"
    assert server.node_labels(NODE) == {**OTHERS, **TWO_VENDORS_LABELS}
    assert labeler.applied == TWO_VENDORS_LABELS


def test_no_patch_when_nothing_changed(server: FakeApiServer, make_labeler: LabelerFactory) -> None:
    server.put_node(NODE, OTHERS)
    labeler = make_labeler(Cards(TWO_VENDORS))
    assert labeler.wait_rounds(1, TIMEOUT)
    for _ in range(3):
        next_round(labeler)
    assert len(server.requests(is_node_patch)) == 1
    assert len(server.requests(is_node_read)) == 1, "between resyncs the last patch is the truth"


def test_a_restarted_daemon_finds_its_labels_in_place(
    server: FakeApiServer, make_labeler: LabelerFactory
) -> None:
    server.put_node(NODE, {**OTHERS, **TWO_VENDORS_LABELS})
    labeler = make_labeler(Cards(TWO_VENDORS))
    assert labeler.wait_rounds(1, TIMEOUT)
    assert server.requests(is_node_patch) == []
    assert labeler.applied == TWO_VENDORS_LABELS


def test_a_vendor_gone_loses_its_labels_as_null(server: FakeApiServer, make_labeler: LabelerFactory) -> None:
    server.put_node(NODE, OTHERS)
    view = Cards(TWO_VENDORS)
    labeler = make_labeler(view)
    server.wait_requests(is_node_patch, 1, TIMEOUT)
    view.cards = (card(0), card(1, health=Health.UNHEALTHY))
    next_round(labeler)
    assert patches(server)[1] == {
        f"{P}ascend.present": None,
        f"{P}ascend.count": None,
        f"{P}ascend.product": None,
        f"{P}nvidia.count": "1",
    }
    assert server.node_labels(NODE) == {
        **OTHERS,
        f"{P}nvidia.present": "true",
        f"{P}nvidia.count": "1",
        f"{P}nvidia.product": "NVIDIA-H100-80GB-HBM3",
        "gpu-type": "NVIDIA-H100-80GB-HBM3",
    }
    view.cards = ()
    next_round(labeler)
    assert server.node_labels(NODE) == OTHERS, "no cards: every owned label goes, the rest stays"


@pytest.mark.parametrize("failing", ["read", "patch"])
def test_an_api_error_is_logged_and_retried(
    failing: str, server: FakeApiServer, make_labeler: LabelerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server.put_node(NODE, OTHERS)
    if failing == "read":
        server.fail_next_node_reads(1)
    else:
        server.fail_next_node_patches(1, code=503)
    with caplog.at_level(logging.WARNING, "hcs_deviceplugin.observability.nodelabels"):
        labeler = make_labeler(Cards(TWO_VENDORS), interval=0.05)
        assert labeler.wait_rounds(2, TIMEOUT)
    assert server.node_labels(NODE) == {**OTHERS, **TWO_VENDORS_LABELS}
    methods = [r.method for r in server.requests(lambda r: is_node_read(r) or is_node_patch(r))][:4]
    expected = ["GET", "GET", "PATCH"] if failing == "read" else ["GET", "PATCH", "GET", "PATCH"]
    assert methods[: len(expected)] == expected, "after a failure the Node is read again"
    action = "read" if failing == "read" else "label"
    code = "500" if failing == "read" else "503"
    assert any(f"could not {action} node {NODE} (HTTP {code}" in r.getMessage() for r in caplog.records)


def test_a_missing_node_is_retried_until_it_exists(
    server: FakeApiServer, make_labeler: LabelerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "hcs_deviceplugin.observability.nodelabels"):
        labeler = make_labeler(Cards(TWO_VENDORS))
        assert labeler.wait_rounds(1, TIMEOUT)
    assert any("HTTP 404" in r.getMessage() for r in caplog.records)
    server.put_node(NODE, OTHERS)
    next_round(labeler)
    assert server.node_labels(NODE) == {**OTHERS, **TWO_VENDORS_LABELS}


def test_labels_removed_by_hand_come_back_at_resync(
    server: FakeApiServer, make_labeler: LabelerFactory
) -> None:
    server.put_node(NODE, OTHERS)
    labeler = make_labeler(Cards(TWO_VENDORS), resync=0.0)
    server.wait_requests(is_node_patch, 1, TIMEOUT)
    assert labeler.wait_rounds(1, TIMEOUT)
    server.put_node(NODE, {**OTHERS, **TWO_VENDORS_LABELS, "gpu-type": "edited"})
    next_round(labeler)
    assert patches(server)[1] == {"gpu-type": "NVIDIA-H100-80GB-HBM3"}


def test_a_failing_view_is_logged_and_the_labeler_goes_on(
    server: FakeApiServer, api: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.put_node(NODE, OTHERS)
    calls: list[int] = []

    def view() -> Cards:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("daemon not ready")
        return Cards(TWO_VENDORS)

    labeler = NodeLabeler(api, NODE, view, interval=3600.0)
    with caplog.at_level(logging.ERROR, "hcs_deviceplugin.observability.nodelabels"):
        labeler.start()
        try:
            assert labeler.wait_rounds(1, TIMEOUT)
            next_round(labeler)
        finally:
            labeler.stop()
    assert any("round failed" in r.getMessage() for r in caplog.records)
    assert server.node_labels(NODE) == {**OTHERS, **TWO_VENDORS_LABELS}


def test_stop_is_prompt(server: FakeApiServer, make_labeler: LabelerFactory) -> None:
    server.put_node(NODE, OTHERS)
    labeler = make_labeler(Cards(TWO_VENDORS))
    assert labeler.wait_rounds(1, TIMEOUT)
    started = time.monotonic()
    labeler.stop(timeout=TIMEOUT)
    assert time.monotonic() - started < 1.0, "stop does not wait for the hour-long interval"
    assert not labeler.is_alive()
    labeler.stop()  # twice is harmless


def test_stop_before_start_is_harmless(api: KubeClient) -> None:
    labeler = NodeLabeler(api, NODE, Cards)
    labeler.stop()
    assert not labeler.is_alive()


# --- wiring ----------------------------------------------------------------------------------------------


def run_settings(tmp_path: Path, **kwargs: object) -> RunSettings:
    (tmp_path / "pools").mkdir(exist_ok=True)
    return RunSettings(
        plugin_dir=tmp_path / "plugins",
        pools_dir=tmp_path / "pools",
        host_root=tmp_path,
        vendors=("simulated",),
        node_name=NODE,
        pod_resources_socket=None,
        pod_resources_interval=5.0,
        metrics_address="127.0.0.1",
        metrics_port=0,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_runner_refuses_node_labels_without_the_api(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--in-cluster or --kubeconfig"):
        Runner(run_settings(tmp_path, node_labels=True))


def test_the_cli_refuses_node_labels_without_the_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "configure_logging", lambda *_args: None)
    assert cli.main(["run", "--vendors=simulated", "--node-labels"]) == 2
    assert "--node-labels needs --in-cluster or --kubeconfig" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", "--gpu-type-label=gpu type"])


def test_the_runner_labels_its_node_and_follows_health(
    tmp_path: Path, server: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulated default node through ``Runner``: labels at start, and a health transition pokes
    the labeler (its interval is the default 30 s, far beyond this test's waits)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    server.put_node(NODE, OTHERS)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{server.port}"}}}}]
users: [{{name: daemon, user: {{token: t}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: daemon}}}}]
current-context: fake
"""
    )
    api = ApiSettings("hcs-system", "app=pools", kubeconfig=kubeconfig)
    runner = Runner(run_settings(tmp_path, api=api, node_labels=True))
    runner.start()
    try:
        assert runner.labeler is not None
        assert runner.labeler.wait_rounds(1, TIMEOUT), "the first round reads the Node and patches it"
        labels = server.node_labels(NODE)
        assert labels["gpu-type"] == "NVIDIA-H100-80GB-HBM3"
        assert labels[f"{P}nvidia.count"] == "4"
        assert {k for k in labels if k.endswith(".present")} == {
            f"{P}{v}.present" for v in ("nvidia", "ascend", "hygon", "cambricon")
        }
        sick = next(c for c in runner.daemon.view().cards if c.vendor == "nvidia")
        backend = runner.backends.running["simulated"]
        backend.inject(HealthEvent(sick.id, Health.UNHEALTHY, "XID 79"))  # type: ignore[attr-defined]
        (_, second) = server.wait_requests(is_node_patch, 2, TIMEOUT)
        assert second.body == {"metadata": {"labels": {f"{P}nvidia.count": "3"}}}

        # The API source's reloads start at 0 (its first list is the load) and count each change.
        assert value(scrape(runner.metrics), "hcs_config_reloads_total", source="api") == 0
        server.put_configmap(
            "hcs-system", "pools", {"pools.yaml": pool_doc(card_pool("z", H100_IDS[0]))}, {"app": "pools"}
        )
        runner.daemon.wait_for(lambda v: "z" in v.wanted_pools, TIMEOUT, "the API pool applied")
        assert value(scrape(runner.metrics), "hcs_config_reloads_total", source="api") >= 1
    finally:
        runner.stop()
