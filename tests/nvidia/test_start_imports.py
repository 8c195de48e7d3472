"""What loading the NVIDIA backend for ``run`` (``--vendors nvidia``) leaves out until it is needed."""

from __future__ import annotations

import json
import subprocess
import sys

NOT_AT_START = ("uuid",)
"""Only Allocate's ``cdi-annotations`` key needs ``uuid`` (and its C module): no start allocates."""

PROBE = """
import json, sys
from hcs_deviceplugin import runner
from vendors.nvidia import backend
print(json.dumps(sorted(sys.modules)))
"""


def test_loading_the_backend_leaves_out_what_only_allocate_needs() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "vendors.nvidia.edits" in loaded
    assert [m for m in loaded if m in NOT_AT_START] == []
