"""``hcs-deviceplugin inspect``: tables and JSON from a running daemon, and a clear error without one."""

from __future__ import annotations

import json
import socket

import pytest

from hcs_deviceplugin.observability.inspect import main, render_inspect
from tests.integration.conftest import H100, resource
from tests.observability.conftest import NODE_NAME, Busy


def test_table_shows_cards_then_pools(busy: Busy, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", busy.obs.url]) == 0
    out = capsys.readouterr().out
    assert out.index("Cards") < out.index("Pools")
    cards, pools = out.split("\nPools\n")
    held_row = next(line for line in cards.splitlines() if line.startswith(busy.held_card))
    assert "NVIDIA H100 80GB HBM3" in held_row and "79.6/79.6" in held_row and "NVLink x3" in held_row
    assert held_row.split()[-1] == busy.held_card  # HELD UNITS
    sick_row = next(line for line in cards.splitlines() if line.startswith(busy.sick_card))
    assert " 0 " in sick_row and " b " in sick_row
    pool_rows = {line.split()[0]: line for line in pools.splitlines()[1:] if line.strip()}
    assert pool_rows["a"].split()[1:7] == [resource("a"), "Exclusive", "2", "2", "1", "registered"]
    assert pool_rows["b"].split()[1:8] == [resource("b"), "TimeSlice", "x2", "2", "0", "0", "registered"]
    assert "Backends\nascend: absent (libdcmi.so" in out
    assert out.startswith(f"Node {NODE_NAME}\n")
    allocations = out.split("\nAllocations\n")[1].split("\n\n")[0].splitlines()
    assert allocations[0].split() == ["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "DEVICE", "CARD"]
    assert [row.split() for row in allocations[1:]] == [
        ["default", "trainer", "main", resource("a"), busy.held_card, busy.held_card]
    ]


def test_json_is_the_report(busy: Busy, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", busy.obs.url + "/", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["node"] == NODE_NAME
    assert {d["id"] for d in report["devices"]} >= set(H100)
    assert [p["name"] for p in report["pools"]] == ["a", "b"]


def test_nothing_listening_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["--url", f"http://127.0.0.1:{port}", "--timeout", "2"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        f"hcs-deviceplugin inspect: cannot reach the daemon at http://127.0.0.1:{port}"
    )
    assert "refused" in captured.err.lower()


def test_attention_sections_appear_only_when_needed() -> None:
    quiet = {
        "node": "n",
        "devices": [],
        "pools": [],
        "backends": [{"name": "x", "state": "running", "reason": ""}],
    }
    text = render_inspect(quiet)
    assert "Conflicts" not in text and "Draining" not in text and "Backends" not in text
    assert "Allocations" not in text
    loud = {
        **quiet,
        "conflicts": [{"card": "c1", "pools": ["a", "b"]}],
        "draining": [
            {"card": "c2", "heldResource": "gpu.deckhouse.io/a", "targetPool": "b", "seconds": 4000.2}
        ],
        "configErrors": ["pools.yaml: pools[0].slicesPerUnit: must be 1..64"],
        "backends": [{"name": "nvidia", "state": "failed", "reason": "NVML_ERROR_GPU_IS_LOST"}],
    }
    text = render_inspect(loud)
    assert "Conflicts\nc1: claimed by a, b" in text
    assert (
        "Draining\nc2: held under gpu.deckhouse.io/a, moves to b when released (draining for 4000 s)" in text
    )
    assert "Config errors\npools.yaml: pools[0].slicesPerUnit: must be 1..64" in text
    assert "Backends\nnvidia: failed (NVML_ERROR_GPU_IS_LOST)" in text
