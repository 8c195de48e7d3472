"""The Kubernetes API source against a local apiserver that speaks the real list/watch wire format.

Every test waits on a condition with a bounded timeout: the ``on_objects`` calls themselves, or requests
the fake server has recorded. To show that a change did *not* notify, a test makes one more, visible
change afterwards and checks that the next call is that one: the watch delivers in order, so a
spurious call would come first.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import pytest

from hcs_deviceplugin.kubeapi.client import KubeClient
from hcs_deviceplugin.kubeapi.config import ClusterConfig
from hcs_deviceplugin.pools.apisource import ApiConfigMapSource, configmap_from_json
from hcs_deviceplugin.pools.objects import ConfigMapObject
from tests.pools.fakeapiserver import FakeApiServer, is_list, is_watch, label_selector_matches

NS = "d8-gpu-control-plane"
SELECTOR = "app=nvidia-device-plugin"
LABELS = {"app": "nvidia-device-plugin", "pool": "team-a"}
TIMEOUT = 5.0
FAST = {"backoff_initial": 0.05, "backoff_max": 0.2}

Snapshot = dict[str, Mapping[str, str]]


class Collector:
    """``on_objects``: keeps every call and lets a test wait for the one it expects."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.calls: list[list[ConfigMapObject]] = []

    def __call__(self, objects: list[ConfigMapObject]) -> None:
        with self._cond:
            self.calls.append(objects)
            self._cond.notify_all()

    def wait_calls(self, count: int, timeout: float = TIMEOUT) -> list[ConfigMapObject]:
        """Wait for the ``count``-th call and return it."""
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.calls) >= count, timeout), (
                f"{len(self.calls)} calls, expected {count}: {self.snapshots()}"
            )
            return self.calls[count - 1]

    def snapshots(self) -> list[Snapshot]:
        with self._cond:
            return [snapshot(call) for call in self.calls]

    @property
    def count(self) -> int:
        with self._cond:
            return len(self.calls)


def snapshot(objects: list[ConfigMapObject]) -> Snapshot:
    """Name → data: what the tests compare."""
    return {obj.name: dict(obj.data) for obj in objects}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[KubeClient]:
    with server.api_client() as client:
        yield client


SourceFactory = Callable[..., tuple[ApiConfigMapSource, Collector]]


@pytest.fixture
def make_source(api: KubeClient) -> Iterator[SourceFactory]:
    """Build and start sources with short back-offs; stops them all at the end."""
    sources: list[ApiConfigMapSource] = []

    def make(
        on_objects: Callable[[list[ConfigMapObject]], None] | None = None, **kwargs: object
    ) -> tuple[ApiConfigMapSource, Collector]:
        collector = Collector()
        options: dict[str, object] = {**FAST, **kwargs}
        selector = str(options.pop("label_selector", SELECTOR))
        source = ApiConfigMapSource(api, NS, selector, on_objects or collector, **options)  # type: ignore[arg-type]
        sources.append(source)
        source.start()
        return source, collector

    yield make
    for source in sources:
        source.stop()


def watching(server: FakeApiServer, count: int = 1) -> None:
    """Wait for the ``count``-th watch stream to start: changes from now on reach it live."""
    assert server.wait_watches_started(count), f"the source did not start watch number {count}"


# --- listing ---------------------------------------------------------------------------------------


def test_initial_list_delivers_matching_objects_with_their_identity(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    rv_a = server.put_configmap(NS, "pool-a", {"config.yaml": "a"}, LABELS)
    server.put_configmap(NS, "pool-b", {"config.yaml": "b"}, {**LABELS, "pool": "team-b"})
    server.put_configmap(NS, "unrelated", {"x": "y"}, {"app": "other"})
    server.put_configmap("other-ns", "pool-c", {"config.yaml": "c"}, LABELS)

    source, collector = make_source()

    assert source.wait_synced(TIMEOUT)
    first = collector.wait_calls(1)
    assert snapshot(first) == {"pool-a": {"config.yaml": "a"}, "pool-b": {"config.yaml": "b"}}
    a = first[0]
    assert (a.namespace, a.name, a.source) == (NS, "pool-a", f"configmap {NS}/pool-a")
    assert a.resource_version == rv_a
    assert dict(a.labels) == LABELS
    assert source.synced
    assert source.last_error == ""
    assert source.uid_of(NS, "pool-a") == server.uid_of(NS, "pool-a")
    (listed,) = server.list_requests()
    assert listed.path == f"/api/v1/namespaces/{NS}/configmaps"
    assert listed.query["labelSelector"] == SELECTOR


def test_an_empty_namespace_still_delivers_once_and_syncs(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    source, collector = make_source()
    assert source.wait_synced(TIMEOUT)
    assert collector.wait_calls(1) == []


def test_the_watch_starts_from_the_lists_version_with_bookmarks_and_a_timeout(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "v"}, LABELS)
    list_rv = server.resource_version
    make_source(watch_timeout_seconds=42, field_selector="metadata.name!=ignored")
    (watch,) = server.wait_requests(is_watch, 1)
    assert watch.query["resourceVersion"] == list_rv
    assert watch.query["allowWatchBookmarks"] == "true"
    assert watch.query["timeoutSeconds"] == "42"
    assert watch.query["labelSelector"] == SELECTOR
    assert watch.query["fieldSelector"] == "metadata.name!=ignored"


# --- watching --------------------------------------------------------------------------------------


def test_added_modified_deleted_each_deliver_the_complete_list(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    source, collector = make_source()
    collector.wait_calls(1)
    watching(server)

    server.put_configmap(NS, "pool-b", {"k": "b"}, LABELS)
    assert snapshot(collector.wait_calls(2)) == {"pool-a": {"k": "1"}, "pool-b": {"k": "b"}}
    rv = server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    third = collector.wait_calls(3)
    assert snapshot(third) == {"pool-a": {"k": "2"}, "pool-b": {"k": "b"}}
    assert third[0].resource_version == rv
    server.delete_configmap(NS, "pool-b")
    assert snapshot(collector.wait_calls(4)) == {"pool-a": {"k": "2"}}
    assert source.uid_of(NS, "pool-b") == ""
    assert len(server.list_requests()) == 1


def test_label_selector_holds_through_the_watch(server: FakeApiServer, make_source: SourceFactory) -> None:
    """Objects that start or stop matching come and go; the rest is never seen."""
    server.put_configmap(NS, "pool-a", {"k": "a"}, LABELS)
    _, collector = make_source()
    collector.wait_calls(1)
    watching(server)

    server.put_configmap(NS, "unrelated", {"k": "u"}, {"app": "other"})
    server.put_configmap(NS, "pool-a", {"k": "a"}, {"app": "other"})  # stops matching: DELETED
    assert snapshot(collector.wait_calls(2)) == {}
    server.put_configmap(NS, "unrelated", {"k": "u"}, LABELS)  # starts matching: ADDED
    assert snapshot(collector.wait_calls(3)) == {"unrelated": {"k": "u"}}
    assert collector.count == 3


def test_set_based_label_selector_is_passed_through(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    selector = "app in (nvidia-device-plugin,gpu-device-plugin),pool"
    assert label_selector_matches(selector, LABELS)
    server.put_configmap(NS, "dp", {"k": "1"}, LABELS)
    server.put_configmap(NS, "adr", {"k": "2"}, {"app": "gpu-device-plugin", "pool": "p"})
    server.put_configmap(NS, "nopool", {"k": "3"}, {"app": "gpu-device-plugin"})
    _, collector = make_source(label_selector=selector)
    assert set(snapshot(collector.wait_calls(1))) == {"dp", "adr"}


def test_a_change_nobody_can_see_is_not_delivered(server: FakeApiServer, make_source: SourceFactory) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    _, collector = make_source()
    collector.wait_calls(1)
    watching(server)

    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)  # same data and labels, new resourceVersion
    server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    assert snapshot(collector.wait_calls(2)) == {"pool-a": {"k": "2"}}
    assert collector.count == 2


def test_a_bookmark_advances_the_version_the_watch_resumes_from(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    _, collector = make_source()
    collector.wait_calls(1)
    watching(server)
    # Versions move on without an event for us (another object changes); only a bookmark tells us.
    server.put_configmap(NS, "unrelated", {"k": "u"}, {"app": "other"})
    server.put_configmap(NS, "unrelated", {"k": "v"}, {"app": "other"})
    bookmark_rv = server.send_bookmark()

    server.drop_watches()
    watches = server.wait_requests(is_watch, 2)
    assert watches[1].query["resourceVersion"] == bookmark_rv
    assert collector.count == 1  # a bookmark is not a change
    assert len(server.list_requests()) == 1


def test_a_watch_that_ends_at_its_timeout_is_resumed_at_once(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    source, collector = make_source(watch_timeout_seconds=1, backoff_initial=5.0, backoff_max=5.0)
    collector.wait_calls(1)
    rv = source.resource_version
    watches = server.wait_requests(is_watch, 2)
    assert watches[1].at - watches[0].at < 2.5  # the server's 1 s, not the 5 s back-off
    assert [w.query["resourceVersion"] for w in watches] == [rv, rv]
    assert len(server.list_requests()) == 1
    assert source.last_error == ""


def test_a_dropped_watch_resumes_from_the_last_version_without_losing_changes(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    rv = server.put_configmap(NS, "pool-b", {"k": "b"}, LABELS)
    source, collector = make_source()
    collector.wait_calls(1)
    watching(server)

    server.hold_watches()
    server.drop_watches()
    # The source is reconnecting and its request is held: these changes happen while it is away.
    server.wait_requests(is_watch, 2)
    server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    server.delete_configmap(NS, "pool-b")
    server.put_configmap(NS, "pool-c", {"k": "c"}, LABELS)
    server.release_watches()

    final = {"pool-a": {"k": "2"}, "pool-c": {"k": "c"}}
    deadline = time.monotonic() + TIMEOUT
    while snapshot(collector.calls[-1]) != final:
        collector.wait_calls(collector.count + 1, max(0.0, deadline - time.monotonic()))
    assert server.watch_requests()[1].query["resourceVersion"] == rv
    assert len(server.list_requests()) == 1
    watching(server, 2)
    assert source.last_error == ""


def test_a_too_old_version_at_watch_start_lists_again(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    server.put_configmap(NS, "pool-b", {"k": "b"}, LABELS)
    _, collector = make_source()
    collector.wait_calls(1)
    watching(server)

    server.hold_watches()
    server.drop_watches()
    server.wait_requests(is_watch, 2)
    server.delete_configmap(NS, "pool-b")
    server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    server.compact()  # the history the held watch asks for is gone: it gets ERROR 410
    server.release_watches()

    assert snapshot(collector.wait_calls(2)) == {"pool-a": {"k": "2"}}
    lists = server.wait_requests(is_list, 2)
    assert "resourceVersion" not in lists[1].query  # a fresh, consistent list
    watches = server.wait_requests(is_watch, 3)
    assert watches[2].query["resourceVersion"] == server.resource_version


@pytest.mark.parametrize("as_http_status", [False, True], ids=["error-event", "http-410"])
def test_an_expired_watch_lists_again_and_delivers_only_a_real_difference(
    server: FakeApiServer, make_source: SourceFactory, as_http_status: bool
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    _, collector = make_source()
    collector.wait_calls(1)
    watching(server)

    server.expire_next_watches(1, as_http_status=as_http_status)
    server.drop_watches()
    server.wait_requests(is_list, 2)
    watching(server, 2)
    assert collector.count == 1  # the re-list found what we had: nothing to deliver
    server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    assert snapshot(collector.wait_calls(2)) == {"pool-a": {"k": "2"}}


def test_a_410_in_an_open_stream_lists_again(server: FakeApiServer, make_source: SourceFactory) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    _, collector = make_source()
    collector.wait_calls(1)
    watching(server)
    server.expire_open_watches()
    server.wait_requests(is_list, 2)
    watching(server, 2)
    server.put_configmap(NS, "pool-b", {"k": "b"}, LABELS)
    assert snapshot(collector.wait_calls(2)) == {"pool-a": {"k": "1"}, "pool-b": {"k": "b"}}


def test_other_watch_errors_resume_from_the_last_version_without_a_list(
    server: FakeApiServer, make_source: SourceFactory
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    source, collector = make_source()
    collector.wait_calls(1)
    watching(server)
    rv = source.resource_version

    server.error_open_watches(500, "InternalError", "etcd hiccup")
    watching(server, 2)
    server.inject_raw_line(b"this is not json")
    watches = server.wait_requests(is_watch, 3)
    assert [w.query["resourceVersion"] for w in watches] == [rv, rv, rv]
    assert len(server.list_requests()) == 1
    server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    assert snapshot(collector.wait_calls(2)) == {"pool-a": {"k": "2"}}


def test_list_failures_back_off_and_then_sync(server: FakeApiServer, make_source: SourceFactory) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    server.fail_next_lists(1000)
    source, collector = make_source(backoff_initial=0.05, backoff_max=0.4)

    lists = server.wait_requests(is_list, 4)
    assert not source.synced
    assert "HTTP 500" in source.last_error
    assert "injected list failure" in source.last_error
    gaps = [b.at - a.at for a, b in itertools.pairwise(lists)]
    # 0.05, 0.1, 0.2 s, each with up to 20 % jitter taken off: the back-off grows.
    for gap, expected in zip(gaps, [0.05, 0.1, 0.2], strict=False):
        assert gap >= expected * 0.8 - 0.01, gaps

    server.fail_next_lists(0)
    assert source.wait_synced(TIMEOUT)
    assert snapshot(collector.wait_calls(1)) == {"pool-a": {"k": "1"}}
    watching(server)
    assert source.last_error == ""
    assert collector.count == 1


def test_an_unreachable_apiserver_is_retried_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    with FakeApiServer() as probe:
        port = probe.port  # a port that was just free and now has no listener
    collector = Collector()
    with (
        KubeClient(ClusterConfig(server=f"http://127.0.0.1:{port}")) as client,
        caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools.apisource"),
    ):
        source = ApiConfigMapSource(client, NS, SELECTOR, collector, **FAST)  # type: ignore[arg-type]
        source.start()
        try:
            deadline = time.monotonic() + TIMEOUT
            while len([r for r in caplog.records if "retrying" in r.getMessage()]) < 2:
                assert time.monotonic() < deadline, "no retries logged"
                assert not source.wait_synced(0.05)
            assert "list:" in source.last_error
        finally:
            source.stop()


def test_on_objects_raising_does_not_stop_the_source(
    server: FakeApiServer, make_source: SourceFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    calls: list[Snapshot] = []
    done = threading.Event()

    def flaky(objects: list[ConfigMapObject]) -> None:
        calls.append(snapshot(objects))
        if len(calls) == 1:
            raise RuntimeError("consumer bug")
        done.set()

    with caplog.at_level(logging.ERROR, logger="hcs_deviceplugin.pools.apisource"):
        source, _ = make_source(on_objects=flaky)
        assert source.wait_synced(TIMEOUT)
        watching(server)
        server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
        assert done.wait(TIMEOUT)
    assert calls[-1] == {"pool-a": {"k": "2"}}
    assert any("on_objects failed" in r.getMessage() for r in caplog.records)


# --- stopping --------------------------------------------------------------------------------------


def test_stop_is_prompt_while_the_watch_is_blocked(server: FakeApiServer, make_source: SourceFactory) -> None:
    server.put_configmap(NS, "pool-a", {"k": "1"}, LABELS)
    source, collector = make_source(watch_timeout_seconds=300)
    collector.wait_calls(1)
    watching(server)

    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 2.0
    assert source._thread is not None and not source._thread.is_alive()
    assert server.wait_open_watches(0)
    server.put_configmap(NS, "pool-a", {"k": "2"}, LABELS)
    assert collector.count == 1


def test_stop_is_prompt_during_a_back_off(server: FakeApiServer, make_source: SourceFactory) -> None:
    server.fail_next_lists(1000)
    source, _ = make_source(backoff_initial=30.0, backoff_max=30.0)
    server.wait_requests(is_list, 1)
    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 2.0


# --- the object conversion -------------------------------------------------------------------------


def test_configmap_from_json_takes_what_the_formats_need() -> None:
    obj, uid = configmap_from_json(
        {
            "kind": "ConfigMap",
            "metadata": {"name": "n", "uid": "u-1", "resourceVersion": "7", "labels": {"a": "b"}},
            "data": {"config.yaml": "x"},
            "binaryData": {"blob": "AAAA"},
        },
        default_namespace="ns",
    )
    assert obj == ConfigMapObject(
        name="n",
        namespace="ns",
        data={"config.yaml": "x"},
        labels={"a": "b"},
        resource_version="7",
        source="configmap ns/n",
    )
    assert uid == "u-1"


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {"metadata": {}},
        {"metadata": {"name": "n"}, "data": {"k": 1}},
        {"metadata": {"name": "n", "labels": ["a"]}},
    ],
    ids=["not-an-object", "no-name", "non-string-data", "labels-not-a-map"],
)
def test_configmap_from_json_rejects_malformed_objects(raw: object) -> None:
    with pytest.raises(ValueError, match=r"not|missing"):
        configmap_from_json(raw)
