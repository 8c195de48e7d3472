"""values.schema.json: the defaults pass, and mistakes are refused before anything renders."""

from __future__ import annotations

import json
from typing import Any

import helm_python as helm
import pytest

from tests.chart.chart import ALL_ON, CHART, chart, render

BAD_VALUES: dict[str, dict[str, Any]] = {
    "vendor enabled as a string": {"vendors": {"nvidia": {"enabled": "yes"}}},
    "vendor privileged as a string": {"vendors": {"ascend": {"privileged": "true"}}},
    "unknown vendor key": {"vendors": {"nvidia": {"enable": True}}},
    "unknown vendor": {"vendors": {"intel": {"enabled": True}}},
    "relative host path": {"vendors": {"hygon": {"hostPaths": [{"path": "opt/hyhal"}]}}},
    "host path type File": {"vendors": {"hygon": {"hostPaths": [{"path": "/opt/hyhal", "type": "File"}]}}},
    "metrics port as a string": {"metricsPort": "8080"},
    "metrics port 0": {"metricsPort": 0},
    "log format": {"logFormat": "xml"},
    "host root /": {"hostRoot": "/"},
    "host root over the image's /usr": {"hostRoot": "/usr"},
    "host root with a trailing slash": {"hostRoot": "/host/"},
    "relative plugin dir": {"pluginDir": "var/lib/kubelet/device-plugins"},
    "unknown top-level key": {"vendor": {"nvidia": {"enabled": True}}},
    "max unavailable 0": {"updateStrategy": {"maxUnavailable": 0}},
    "max unavailable 0%": {"updateStrategy": {"maxUnavailable": "0%"}},
    "pool version": {"pools": {"config": {"version": "v2", "pools": []}}},
    "pool name": {"pools": {"config": {"version": "v1", "pools": [{"name": "Team_A"}]}}},
    "pool slices": {"pools": {"config": {"version": "v1", "pools": [{"name": "a", "slicesPerUnit": 65}]}}},
    "pool unit": {"pools": {"config": {"version": "v1", "pools": [{"name": "a", "unit": "Gpu"}]}}},
    "empty device": {"pools": {"config": {"version": "v1", "pools": [{"name": "a", "devices": [{}]}]}}},
    "in-cluster as a string": {"apiSource": {"inCluster": "true"}},
    "scrape interval": {"serviceMonitor": {"interval": "30 seconds"}},
    "capability with CAP_ prefix in lower case": {"securityContext": {"addCapabilities": ["cap_sys_admin"]}},
}


def test_schema_is_valid_json_and_strict_at_the_top() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]["vendors"]["properties"]) == {"nvidia", "ascend", "hygon", "cambricon"}


def test_defaults_and_all_on_pass() -> None:
    chart().validate_schema(None)
    chart().validate_schema(chart().values)
    chart().validate_schema(chart().merge_values(ALL_ON))


@pytest.mark.parametrize("name", BAD_VALUES)
def test_bad_values_are_rejected(name: str) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart().validate_schema(chart().merge_values(BAD_VALUES[name]))


def test_render_refuses_bad_values_with_the_path() -> None:
    with pytest.raises(helm.HelmValuesError, match="/vendors/nvidia/enabled"):
        render({"vendors": {"nvidia": {"enabled": "yes"}}})


def test_lint_reports_bad_values() -> None:
    report = helm.lint(CHART, {"vendors": {"nvidia": {"enabled": "yes"}}})
    assert any("/vendors/nvidia/enabled" in error for error in report["errors"])
