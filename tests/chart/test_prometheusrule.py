"""The PrometheusRule: off by default; its alerts parse as PromQL, use only metrics the daemon exports,
and (where promtool is installed) fire when and only when they should.

Syntax and metric names are checked with ``promql-parser`` (the Rust parser GreptimeDB uses, a dev
dependency); behaviour with Prometheus' own ``promtool test rules``, found as ``$PROMTOOL`` or on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import promql_parser
import pytest
import yaml

from hcs_deviceplugin.observability.metrics import Metrics, ViewCollector
from tests.chart.chart import CHART, NAMESPACE, Obj, kinds, only, render

ON: Obj = {"prometheusRule": {"enabled": True}}
ALERTS = [
    "HcsCardUnhealthy",
    "HcsPoolNotRegistered",
    "HcsPoolConfigError",
    "HcsBackendFailed",
    "HcsBackendAbsent",
    "HcsCardDrainingTooLong",
]

_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_DURATION = {
    "type": "string",
    "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
# The part of the PrometheusRule CRD (monitoring.coreos.com/v1) the chart uses: its fields, their types,
# and nothing unknown.
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _LABELS},
        },
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["alert", "expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                                        "expr": {"type": "string", "minLength": 1},
                                        "for": _DURATION,
                                        "labels": _LABELS,
                                        "annotations": _LABELS,
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def _rule_object(values: Obj | None = None) -> Obj:
    return only(render({**ON, **(values or {})} if values else ON), "PrometheusRule")


def _rules(values: Obj | None = None) -> dict[str, Obj]:
    rule = _rule_object(values)
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def exported_series_names() -> set[str]:
    """Every sample name the daemon's /metrics can carry, from its own collectors' descriptions."""
    families = list(ViewCollector(lambda: pytest.fail("describe() must not read the view")).describe())
    families += list(Metrics(process_metrics=False).registry.collect())
    suffixes = {
        "gauge": [""],
        "counter": ["_total", "_created"],
        "info": ["_info"],
        "histogram": ["_bucket", "_sum", "_count", "_created"],
    }
    return {family.name + suffix for family in families for suffix in suffixes[family.kind]}


def selectors(expr: str) -> list[Any]:
    """The vector selectors of ``expr`` (raises ValueError when it is not valid PromQL)."""
    found: list[Any] = []

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_no_rule_by_default() -> None:
    assert "PrometheusRule" not in kinds(render())


def test_rule_shape_and_namespace() -> None:
    rule = _rule_object({"prometheusRule": {"enabled": True, "additionalLabels": {"release": "prom"}}})
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    assert rule["metadata"]["namespace"] == NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "prom"


def test_the_alerts_the_issue_asks_for() -> None:
    rules = _rules()
    assert list(rules) == ALERTS
    assert rules["HcsCardUnhealthy"]["for"] == "5m"
    assert rules["HcsCardDrainingTooLong"]["for"] == "1m"
    assert "> 3600" in rules["HcsCardDrainingTooLong"]["expr"]
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    assert schema["properties"]["prometheusRule"]["properties"]["disabled"]["items"]["enum"] == ALERTS


def test_every_expression_parses_and_uses_exported_metrics() -> None:
    exported = exported_series_names()
    assert {"hcs_card_healthy", "hcs_config_errors_total", "hcs_backend_info"} <= exported
    for name, rule in _rules().items():
        used = {s.name for s in selectors(rule["expr"])}
        assert used, name
        assert used <= exported, f"{name} uses {used - exported}, which the daemon does not export"


def test_the_parser_refuses_broken_promql() -> None:
    """The syntax check can fail: a broken expression and an unknown function are refused."""
    with pytest.raises(ValueError):
        selectors("max without (model (hcs_card_healthy) == 0")
    with pytest.raises(ValueError):
        selectors("increse(hcs_config_errors_total[15m]) > 0")


def test_card_alert_does_not_group_by_model_or_pool() -> None:
    """The card labels are changing (model and pool are being dropped): no alert may keep them."""
    for name, rule in _rules().items():
        assert " by (" not in rule["expr"] and " by(" not in rule["expr"], name
    assert "without (model, pool)" in _rules()["HcsCardUnhealthy"]["expr"]


def test_series_selector_reaches_every_selector() -> None:
    matcher = 'namespace="hcs-system"'
    rules = _rules({"prometheusRule": {"enabled": True, "seriesSelector": matcher}})
    for name, rule in rules.items():
        for selector in selectors(rule["expr"]):
            pairs = {(m.name, m.value) for m in selector.matchers.matchers}
            assert ("namespace", "hcs-system") in pairs, name


def test_disabled_alerts_and_alert_labels() -> None:
    values = {
        "prometheusRule": {
            "enabled": True,
            "disabled": ["HcsBackendAbsent"],
            "alertLabels": {"team": "gpu", "severity": "page"},
        }
    }
    rules = _rules(values)
    assert "HcsBackendAbsent" not in rules
    assert len(rules) == len(ALERTS) - 1
    for rule in rules.values():
        assert rule["labels"] == {"team": "gpu", "severity": "page"}
    assert _rules()["HcsBackendFailed"]["labels"] == {"severity": "critical"}


# --- behaviour, with Prometheus' own rule engine ---------------------------------------------------

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (set PROMTOOL)")

W1 = 'node="w1"'


def _alert(name: str, at: str, *expected: tuple[dict[str, str], dict[str, str]]) -> dict[str, Any]:
    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [{"exp_labels": labels, "exp_annotations": notes} for labels, notes in expected],
    }


def _description(name: str) -> str:
    text: str = _rules()[name]["annotations"]["description"]
    return text


UNHEALTHY = "has been unhealthy for 5 minutes."
PROMTOOL_TESTS: dict[str, dict[str, Any]] = {
    "card unhealthy for 5 minutes, with or without model and pool, across a pool move": {
        "input_series": [
            # Old labels; unhealthy from 1m.
            {
                "series": f'hcs_card_healthy{{card="GPU-a",vendor="nvidia",model="H100",pool="a",{W1}}}',
                "values": "1 0x10",
            },
            # New labels (no model, no pool); unhealthy from 0m.
            {"series": f'hcs_card_healthy{{card="GPU-b",vendor="nvidia",{W1}}}', "values": "0x10"},
            # Unhealthy throughout, moving from pool a to pool b at 3m: one alert, clock not restarted.
            {
                "series": f'hcs_card_healthy{{card="GPU-c",vendor="nvidia",model="H100",pool="a",{W1}}}',
                "values": "0 0 0 stale",
            },
            {
                "series": f'hcs_card_healthy{{card="GPU-c",vendor="nvidia",model="H100",pool="b",{W1}}}',
                "values": "_ _ _ 0x10",
            },
            # Healthy: never.
            {"series": f'hcs_card_healthy{{card="GPU-d",vendor="nvidia",{W1}}}', "values": "1x10"},
        ],
        "alerts": [
            ("HcsCardUnhealthy", "4m"),
            ("HcsCardUnhealthy", "5m", "GPU-b", "GPU-c"),
            ("HcsCardUnhealthy", "6m", "GPU-a", "GPU-b", "GPU-c"),
        ],
    },
    "pool not registered for 5 minutes": {
        "input_series": [
            {
                "series": f'hcs_pool_registered{{pool="a",resource="gpu.deckhouse.io/a",{W1}}}',
                "values": "0x10",
            },
            {
                "series": f'hcs_pool_registered{{pool="b",resource="gpu.deckhouse.io/b",{W1}}}',
                "values": "1x10",
            },
        ],
        "alerts": [("HcsPoolNotRegistered", "4m"), ("HcsPoolNotRegistered", "5m", "a")],
    },
    "config errors in effect, or come and gone": {
        "input_series": [
            # w1: an object's first error; its counter series is born at 1, only the gauge shows it.
            {"series": f"hcs_config_active_errors{{{W1}}}", "values": "0 1x5"},
            {
                "series": f'hcs_config_errors_total{{source="file",object="/p/a.yaml",{W1}}}',
                "values": "_ 1x5",
            },
            # w2: an error reported and fixed between scrapes; only the counter shows it.
            {"series": 'hcs_config_active_errors{node="w2"}', "values": "0x5"},
            {"series": 'hcs_config_errors_total{source="api",object="ns/cm",node="w2"}', "values": "1 1 2x3"},
            # w3: nothing wrong.
            {"series": 'hcs_config_active_errors{node="w3"}', "values": "0x5"},
        ],
        "alerts": [("HcsPoolConfigError", "0m"), ("HcsPoolConfigError", "3m", "w1", "w2")],
    },
    "backend failed for 5 minutes, whatever its reason says": {
        "input_series": [
            {
                "series": f'hcs_backend_info{{backend="nvidia",state="failed",reason="NVML timeout",{W1}}}',
                "values": "1 1 1 stale",
            },
            {
                "series": f'hcs_backend_info{{backend="nvidia",state="failed",reason="NVML gone",{W1}}}',
                "values": "_ _ _ 1x10",
            },
            {
                "series": f'hcs_backend_info{{backend="hygon",state="running",reason="",{W1}}}',
                "values": "1x10",
            },
        ],
        "alerts": [("HcsBackendFailed", "4m"), ("HcsBackendFailed", "5m", "nvidia")],
    },
    "backend absent for 15 minutes": {
        "input_series": [
            {
                "series": f'hcs_backend_info{{backend="ascend",state="absent",reason="no libdcmi",{W1}}}',
                "values": "1x20",
            },
        ],
        "alerts": [("HcsBackendAbsent", "14m"), ("HcsBackendAbsent", "15m", "ascend")],
    },
    "a held card drains for over an hour": {
        "input_series": [
            {"series": f'hcs_card_draining_seconds{{card="GPU-1",{W1}}}', "values": "0+60x70"},
            {"series": 'hcs_card_draining_seconds{card="GPU-2",node="w2"}', "values": "0+60x50"},
        ],
        "alerts": [("HcsCardDrainingTooLong", "61m"), ("HcsCardDrainingTooLong", "62m", "GPU-1")],
    },
}


def _expected(name: str, subject: str) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations of one firing alert, written out for each alert."""
    card = {"vendor": "nvidia", "node": "w1", "severity": "warning"}
    if name == "HcsCardUnhealthy":
        return (
            {**card, "card": subject},
            {"summary": f"Card {subject} (nvidia) on w1 {UNHEALTHY}", "description": _description(name)},
        )
    if name == "HcsPoolNotRegistered":
        resource = f"gpu.deckhouse.io/{subject}"
        return (
            {"pool": subject, "resource": resource, "node": "w1", "severity": "warning"},
            {
                "summary": f"Pool {subject} ({resource}) is not registered with kubelet on w1.",
                "description": _description(name).replace("{{ $labels.resource }}", resource),
            },
        )
    if name == "HcsPoolConfigError":
        return (
            {"node": subject, "severity": "warning"},
            {"summary": f"Pool configuration errors on {subject}.", "description": _description(name)},
        )
    if name in {"HcsBackendFailed", "HcsBackendAbsent"}:
        state, severity, word = (
            ("failed", "critical", "failed")
            if name == "HcsBackendFailed"
            else ("absent", "info", "is absent")
        )
        return (
            {"backend": subject, "state": state, "node": "w1", "severity": severity},
            {"summary": f"Vendor backend {subject} {word} on w1.", "description": _description(name)},
        )
    assert name == "HcsCardDrainingTooLong"
    return (
        {"card": subject, "node": "w1", "severity": "warning"},
        {
            "summary": f"Card {subject} on w1 has waited over an hour to change pool.",
            "description": _description(name),
        },
    )


def _promtool(*arguments: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *[str(a) for a in arguments]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _write_rules(tmp_path: Path) -> Path:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(_rule_object()["spec"]))
    return rules


@needs_promtool
def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    result = _promtool("check", "rules", _write_rules(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


@needs_promtool
@pytest.mark.parametrize("case", PROMTOOL_TESTS)
def test_promtool_alerts_fire_when_they_should(case: str, tmp_path: Path) -> None:
    spec = PROMTOOL_TESTS[case]
    _write_rules(tmp_path)
    checks = [
        _alert(name, at, *(_expected(name, subject) for subject in subjects))
        for name, at, *subjects in spec["alerts"]
    ]
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": spec["input_series"], "alert_rule_test": checks}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(unit))
    result = _promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_tests_can_fail(tmp_path: Path) -> None:
    """The harness really checks: an alert expected too early is reported."""
    _write_rules(tmp_path)
    spec = PROMTOOL_TESTS["pool not registered for 5 minutes"]
    early = _alert("HcsPoolNotRegistered", "3m", _expected("HcsPoolNotRegistered", "a"))
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": spec["input_series"], "alert_rule_test": [early]}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(unit))
    assert _promtool("test", "rules", "test.yaml", cwd=tmp_path).returncode != 0
