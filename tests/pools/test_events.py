"""Events for pool config errors, written to a local apiserver and read back as it stored them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from hcs_deviceplugin.kubeapi.client import KubeClient
from hcs_deviceplugin.kubeapi.config import ClusterConfig
from hcs_deviceplugin.pools.apisource import ApiConfigMapSource
from hcs_deviceplugin.pools.events import REASON_INVALID_POOL_CONFIG, EventRecorder, truncate_message
from hcs_deviceplugin.pools.objects import ConfigMapObject
from tests.pools.fakeapiserver import FakeApiServer, RecordedRequest

NS = "d8-gpu-control-plane"
NODE = "k8s-w1.gpu.example.ru"
TIMEOUT = 5.0
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    """A settable ``datetime`` clock, so timestamps can be asserted exactly."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[KubeClient]:
    with server.api_client() as client:
        yield client


@pytest.fixture
def clock() -> Clock:
    return Clock()


RecorderFactory = Callable[..., EventRecorder]


@pytest.fixture
def make_recorder(api: KubeClient, clock: Clock) -> Iterator[RecorderFactory]:
    recorders: list[EventRecorder] = []

    def make(**kwargs: object) -> EventRecorder:
        recorder = EventRecorder(api, NS, node_name=NODE, clock=clock, **kwargs)  # type: ignore[arg-type]
        recorders.append(recorder)
        return recorder

    yield make
    for recorder in recorders:
        recorder.close()


def configmap(
    name: str = "nvidia-device-plugin-team-a-config", namespace: str = NS, rv: str = "17"
) -> ConfigMapObject:
    return ConfigMapObject(
        name=name,
        namespace=namespace,
        data={"config.yaml": "x"},
        resource_version=rv,
        source=f"configmap {NS}/{name}",
    )


def writes(server: FakeApiServer) -> list[RecordedRequest]:
    return server.requests(lambda r: r.method in ("POST", "PATCH"))


def test_a_config_error_becomes_a_warning_event_on_the_configmap(
    server: FakeApiServer, make_recorder: RecorderFactory
) -> None:
    recorder = make_recorder(uid_lookup=lambda ns, name: f"uid-of-{ns}-{name}")
    recorder.config_error(configmap(), "pools[0].unit: must be Card or Partition")
    assert recorder.flush(TIMEOUT)

    (post,) = writes(server)
    assert (post.method, post.path) == ("POST", f"/api/v1/namespaces/{NS}/events")
    (event,) = server.events()
    assert event["metadata"]["name"].startswith("nvidia-device-plugin-team-a-config.")
    assert event["metadata"]["namespace"] == NS
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": NS,
        "name": "nvidia-device-plugin-team-a-config",
        "uid": f"uid-of-{NS}-nvidia-device-plugin-team-a-config",
        "resourceVersion": "17",
    }
    assert event["type"] == "Warning"
    assert event["reason"] == REASON_INVALID_POOL_CONFIG
    assert event["message"] == "pools[0].unit: must be Card or Partition"
    assert event["source"] == {"component": "hcs-deviceplugin", "host": NODE}
    assert event["count"] == 1
    assert _parse(event["firstTimestamp"]) == _parse(event["lastTimestamp"]) == T0


def test_the_same_message_on_the_same_object_bumps_the_count(
    server: FakeApiServer, make_recorder: RecorderFactory, clock: Clock
) -> None:
    recorder = make_recorder()
    recorder.config_error(configmap(), "bad")
    assert recorder.flush(TIMEOUT)
    clock.now = T0 + timedelta(minutes=3)
    recorder.config_error(configmap(rv="18"), "bad")  # a new version with the same error
    recorder.config_error(configmap(), "bad")
    assert recorder.flush(TIMEOUT)

    methods = [r.method for r in writes(server)]
    assert methods == ["POST", "PATCH", "PATCH"]
    patch = writes(server)[-1]
    assert patch.content_type == "application/strategic-merge-patch+json"
    (event,) = server.events()
    assert patch.path == f"/api/v1/namespaces/{NS}/events/{event['metadata']['name']}"
    assert event["count"] == 3
    assert _parse(event["firstTimestamp"]) == T0
    assert _parse(event["lastTimestamp"]) == T0 + timedelta(minutes=3)


def test_a_different_message_or_object_is_a_new_event(
    server: FakeApiServer, make_recorder: RecorderFactory
) -> None:
    uids = {"a": "uid-1"}
    recorder = make_recorder(uid_lookup=lambda ns, name: uids.get(name, ""))
    recorder.config_error(configmap("a"), "bad")
    recorder.config_error(configmap("a"), "worse")
    recorder.config_error(configmap("b"), "bad")
    assert recorder.flush(TIMEOUT)
    uids["a"] = "uid-2"  # deleted and created again: a different object
    recorder.config_error(configmap("a"), "bad")
    assert recorder.flush(TIMEOUT)

    assert [r.method for r in writes(server)] == ["POST"] * 4
    assert [(e["involvedObject"]["name"], e["message"]) for e in server.events()] == [
        ("a", "bad"),
        ("a", "worse"),
        ("b", "bad"),
        ("a", "bad"),
    ]


def test_an_expired_event_is_created_again(server: FakeApiServer, make_recorder: RecorderFactory) -> None:
    recorder = make_recorder()
    recorder.config_error(configmap(), "bad")
    assert recorder.flush(TIMEOUT)
    server.delete_events()  # its TTL ran out
    recorder.config_error(configmap(), "bad")
    assert recorder.flush(TIMEOUT)

    assert [r.method for r in writes(server)] == ["POST", "PATCH", "POST"]
    (event,) = server.events()
    assert event["count"] == 1


def test_long_messages_are_cut_to_1024_bytes(server: FakeApiServer, make_recorder: RecorderFactory) -> None:
    recorder = make_recorder()
    recorder.config_error(configmap(), "ошибка " * 500)  # two-byte letters: cut must not split one
    assert recorder.flush(TIMEOUT)
    (event,) = server.events()
    assert len(event["message"].encode()) <= 1024
    assert event["message"].endswith("...")
    assert truncate_message("short") == "short"


def test_an_object_from_a_mounted_file_is_referenced_in_the_recorders_namespace(
    server: FakeApiServer, make_recorder: RecorderFactory
) -> None:
    recorder = make_recorder()
    from_file = ConfigMapObject(name="hcs-deviceplugin-pools", data={}, source="/etc/hcs/pools/pools.yaml")
    recorder.config_error(from_file, "version: must be v1")
    assert recorder.flush(TIMEOUT)
    (event,) = server.events()
    assert event["metadata"]["namespace"] == NS
    assert event["involvedObject"]["namespace"] == NS
    assert "resourceVersion" not in event["involvedObject"]
    assert "uid" not in event["involvedObject"]


def test_failures_are_logged_not_raised_and_the_next_report_tries_again(
    server: FakeApiServer, make_recorder: RecorderFactory, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = make_recorder()
    server.fail_next_event_writes(1)
    with caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools.events"):
        recorder.config_error(configmap(), "bad")
        assert recorder.flush(TIMEOUT)
    assert server.events() == []
    assert any(
        "could not create event" in r.getMessage() and "HTTP 500" in r.getMessage() for r in caplog.records
    )

    recorder.config_error(configmap(), "bad")
    assert recorder.flush(TIMEOUT)
    assert [r.method for r in writes(server)] == ["POST", "POST"]  # not a PATCH of an Event that never was
    assert len(server.events()) == 1


def test_an_unreachable_apiserver_does_not_block_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    with FakeApiServer() as probe:
        port = probe.port  # nothing listens there any more
    with (
        KubeClient(ClusterConfig(server=f"http://127.0.0.1:{port}")) as client,
        caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools.events"),
    ):
        recorder = EventRecorder(client, NS, node_name=NODE)
        recorder.config_error(configmap(), "bad")
        assert recorder.flush(TIMEOUT)
        recorder.close()
        recorder.config_error(configmap(), "after close")  # dropped, logged, no error
    messages = [r.getMessage() for r in caplog.records]
    assert any("could not create event" in m for m in messages)
    assert any("closed" in m for m in messages)


def test_the_api_source_supplies_the_uid(server: FakeApiServer, api: KubeClient) -> None:
    """Wired as the daemon wires them: ``kubectl describe`` matches Events by uid."""
    server.put_configmap(NS, "pool-a", {"config.yaml": "x"}, {"app": "nvidia-device-plugin"})
    received: list[list[ConfigMapObject]] = []
    source = ApiConfigMapSource(api, NS, "app=nvidia-device-plugin", received.append, backoff_initial=0.05)
    source.start()
    recorder = EventRecorder(api, NS, node_name=NODE, uid_lookup=source.uid_of)
    try:
        assert source.wait_synced(TIMEOUT)
        recorder.config_error(received[0][0], "bad")
        assert recorder.flush(TIMEOUT)
    finally:
        recorder.close()
        source.stop()
    (event,) = server.events()
    assert event["involvedObject"]["uid"] == server.uid_of(NS, "pool-a")
    assert event["involvedObject"]["resourceVersion"] == received[0][0].resource_version


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
