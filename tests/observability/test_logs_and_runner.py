"""JSON log lines keep their structured fields, and the assembled daemon (``Runner``, as ``run`` builds
it) shows who holds each device in ``/metrics``, ``/report`` and ``inspect`` over the kubelet simulator."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hcs_deviceplugin import __version__
from hcs_deviceplugin.jsonlogs import JsonFormatter
from hcs_deviceplugin.logsetup import configure_logging
from hcs_deviceplugin.observability.inspect import main as inspect_main
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.runner import Runner, RunSettings
from tests.integration.conftest import H100, WAIT, Node, card_pool, fresh_node, pool_doc, resource
from tests.observability.conftest import parse_samples, value


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The root logger writing JSON lines into a buffer, as ``run --log-format=json`` sets it up."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def record(message: str, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("hcs.test", level, __file__, 1, message, None, None)
    made.__dict__.update(extra)
    return made


def test_extra_fields_are_kept_after_the_fixed_ones() -> None:
    line = JsonFormatter().format(
        record(
            "pool config error",
            logging.ERROR,
            config_source="d8-gpu/pools",
            config_path="pools[0].slicesPerUnit",
            pool="team-a",
            card=H100[0],
            plugin_dir=Path("/var/lib/kubelet/device-plugins"),
        )
    )
    data = json.loads(line)
    assert list(data)[:4] == ["time", "level", "logger", "message"]
    assert data["level"] == "error" and data["logger"] == "hcs.test" and data["time"].endswith("Z")
    assert data["config_source"] == "d8-gpu/pools"
    assert data["config_path"] == "pools[0].slicesPerUnit"
    assert (data["pool"], data["card"]) == ("team-a", H100[0])
    assert data["plugin_dir"] == "/var/lib/kubelet/device-plugins"  # a Path is written as text
    for internal in ("args", "msg", "levelno", "pathname", "thread", "exc_info"):
        assert internal not in data


def test_an_exception_is_one_field() -> None:
    try:
        raise ValueError("bad unit")
    except ValueError:
        made = record("failed", logging.ERROR)
        made.exc_info = sys.exc_info()
    data = json.loads(JsonFormatter().format(made))
    assert data["exception"].startswith("Traceback") and "ValueError: bad unit" in data["exception"]


def test_a_broken_pool_file_logs_its_source_and_path_as_fields(tmp_path: Path, json_log: io.StringIO) -> None:
    (tmp_path / "pools.yaml").write_text("version: v1\npools:\n  - name: a\n    slicesPerUnit: 0\n")
    DirectoryPoolSource(tmp_path, lambda _pools, _errors: None).reload()
    errors = [line for line in lines(json_log) if line["message"].startswith("pool config error")]
    assert errors, json_log.getvalue()
    assert errors[0]["level"] == "error"
    assert errors[0]["config_source"].endswith("pools.yaml")
    assert "slicesPerUnit" in errors[0]["config_path"]


def node_settings(node: Node, **extra: Any) -> RunSettings:
    """``run``'s settings for the simulated ``node`` with its metrics on a free local port."""
    return RunSettings(
        plugin_dir=node.plugin_dir,
        pools_dir=node.pools_dir,
        host_root=node.root,
        vendors=("simulated",),
        node_name="node-1",
        pod_resources_socket=node.root / "pr.sock",
        pod_resources_interval=0.1,
        metrics_address="127.0.0.1",
        metrics_port=0,
        **extra,
    )


def test_the_running_daemon_attributes_devices_and_logs_its_start_and_stop(
    json_log: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    with fresh_node() as node:
        node.write_pools(pool_doc(card_pool("a", H100[0], H100[1])))
        runner = Runner(node_settings(node, allocation_settle_seconds=0.3))
        node.daemon = runner.daemon
        runner.start()
        try:
            node.wait_registered("a")
            url = runner.http.url
            first = scrape(url)
            assert value(first, "hcs_config_reloads_total", source="file") == 0  # a load, not a reload
            assert value(first, "hcs_config_errors_total", source="file", object="pools.yaml") == 0
            assert value(first, "hcs_allocate_requests_total", pool="a", result="ok") == 0
            assert value(first, "hcs_health_transitions_total", card=H100[0], to="Unhealthy") == 0
            assert not [s for s in first if s[0] == "hcs_device_allocation_info"]

            held = node.kubelet.allocate("trainer", "main", resource("a"), 1, namespace="ml").device_ids[0]
            runner.daemon.wait_for(lambda v: bool(v.allocations), WAIT, "pod-resources names the holder")
            samples = scrape(url)
            who = {"namespace": "ml", "pod": "trainer", "container": "main", "resource": resource("a")}
            assert value(samples, "hcs_device_allocation_info", device=held, **who) == 1
            assert value(samples, "hcs_allocate_requests_total", pool="a", result="ok") == 1

            with urllib.request.urlopen(url + "/report", timeout=5) as response:
                report = json.loads(response.read())
            assert report["allocations"] == [{**who, "device": held, "card": held}]
            assert [d["heldBy"] for d in report["devices"] if d["id"] == held] == [["ml/trainer/main"]]

            assert inspect_main(["--url", url]) == 0
            out = capsys.readouterr().out
            assert ["ml", "trainer", "main", resource("a"), held, held] in [
                row.split() for row in out.split("\nAllocations\n")[1].splitlines()
            ]

            node.write_pools(pool_doc(card_pool("a", H100[0], H100[1]), card_pool("b", H100[2])))
            node.wait_registered("a", "b")
            assert value(scrape(url), "hcs_config_reloads_total", source="file") >= 1
        finally:
            runner.stop("test over")

    logged = lines(json_log)
    start = [line for line in logged if line.get("event") == "start"]
    assert len(start) == 1, logged
    assert start[0]["version"] == __version__
    assert start[0]["vendors"] == ["simulated"]
    assert start[0]["pools"] == ["a"]
    assert start[0]["report_access"] == "local"
    stop = [line for line in logged if line.get("event") == "stop"]
    assert len(stop) == 1 and stop[0]["reason"] == "test over" and stop[0]["version"] == __version__


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        return parse_samples(response.read().decode())


def test_a_runner_waiting_for_the_lock_answers_its_probes(tmp_path: Path) -> None:
    """Its HTTP server is built once its pools have registered or DEFER_LIMIT has passed: a second
    instance waiting for the plugin-dir lock (no pools yet) still answers /readyz, and says why."""
    with fresh_node() as node:
        node.write_pools(pool_doc(card_pool("a", H100[0])))

        first = Runner(node_settings(node, state_dir=tmp_path / "first"))
        node.daemon = first.daemon
        first.start()
        second = Runner(node_settings(node, state_dir=tmp_path / "second"))
        starting = threading.Thread(target=second.start, daemon=True)
        starting.start()
        try:
            node.wait_registered("a")
            second.daemon.wait_for(lambda v: "waiting for the lock" in v.waiting_for, WAIT, "the lock wait")
            try:
                with urllib.request.urlopen(second.http.url + "/readyz", timeout=WAIT) as response:
                    status, body = response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read().decode()
            assert status == 503 and "waiting for the lock" in body, body
        finally:
            second.stop("test over")
            starting.join(WAIT)
            first.stop("test over")
        assert not starting.is_alive()
