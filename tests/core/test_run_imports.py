"""What ``hcs-deviceplugin run`` loads before it knows it needs it: every module costs start-up CPU
and resident memory on every node. DRA (its gRPC servers and protos), jsonschema (a test and chart
tool), the Kubernetes client (only with an API source) and grpcio (our pools are served by
``hcs_deviceplugin.rpc``; grpcio only by DRA and the kubelet simulator) stay out of a plain run's
imports."""

from __future__ import annotations

import json
import subprocess
import sys

NOT_AT_RUN = (
    "hcs_deviceplugin.dra",
    "jsonschema",
    "kubernetes",
    "grpc",
    "hcs_deviceplugin.kubeletsim",
    "prometheus_client",
)

PROBE = """
import json, sys
from hcs_deviceplugin import cli, runner
cli.build_parser()
print(json.dumps(sorted(sys.modules)))
"""


def test_a_plain_run_loads_no_dra_jsonschema_or_kubernetes() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout)
    assert "hcs_deviceplugin.daemon.core" in loaded  # the probe did load the run path
    unwanted = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_AT_RUN)]
    assert unwanted == []
