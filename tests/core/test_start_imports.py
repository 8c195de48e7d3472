"""The import profile of ``bench.start_imports``: reading ``-X importtime`` with the wrapper's start
lines and the streaming mark, and adding it up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.installed import Layout
from bench.start_imports import (
    BEFORE_HOOK,
    STREAMING_MARK,
    WRAPPER,
    ImportCost,
    Part,
    by_group,
    group_of,
    median_self_times,
    parse_importtime,
    wrapped,
)

CAPTURE = f"""\
import time: self [us] | cumulative | imported package
import time:       844 |        844 |   _io
hcs-import-start hcs_deviceplugin.backend MainThread
hcs-import-start hcs_deviceplugin.model MainThread
hcs-deviceplugin: error: a stray stderr line
import time:     17389 |      17389 |     hcs_deviceplugin.model
import time:      1511 |      31751 |   hcs_deviceplugin.backend
{STREAMING_MARK}
hcs-import-start waitress observability-http
hcs-import-start _socket observability-http
hcs-import-start _socket observability-http
hcs-import-start hcs_deviceplugin.allocator settle heap
import time:        30 |         30 |     _socket
import time:       500 |        500 |   hcs_deviceplugin.allocator
hcs-import-start platform observability-http
import time:       200 |        200 |   platform
import time:       400 |        630 | waitress
"""


def test_parse_importtime_gives_each_line_its_thread_and_part_of_the_run() -> None:
    assert parse_importtime(CAPTURE) == [
        ImportCost("_io", 844, 844, 1),
        ImportCost("hcs_deviceplugin.model", 17389, 17389, 2, "MainThread"),
        ImportCost("hcs_deviceplugin.backend", 1511, 31751, 1, "MainThread"),
        ImportCost("_socket", 30, 30, 2, "observability-http", True, True),
        ImportCost("hcs_deviceplugin.allocator", 500, 500, 1, "settle heap", True, True),
        ImportCost("platform", 200, 200, 1, "observability-http", True, False),
        ImportCost("waitress", 400, 630, 0, "observability-http", True, True),
    ]


def test_an_import_with_no_start_line_was_made_before_the_hook() -> None:
    (cost,) = parse_importtime("import time:       844 |        844 |   _io\n")
    assert (cost.thread, cost.after_streaming, cost.overlapped) == (BEFORE_HOOK, False, False)


@pytest.mark.parametrize(
    ("module", "group"),
    [
        ("hcs_deviceplugin", "hcs_deviceplugin (ours)"),
        ("hcs_deviceplugin.daemon.core", "hcs_deviceplugin (ours)"),
        ("vendors.nvidia.nvml", "vendors (ours)"),
        ("google.protobuf.descriptor", "google.protobuf"),
        ("hpack.huffman_table", "h2, hpack, hyperframe"),
        ("_yaml", "yaml"),
        ("pynvml", "pynvml"),
        ("waitress.server", "waitress"),
        ("typing", "standard library and other"),
        ("hcs_deviceplugin_extra", "standard library and other"),
    ],
)
def test_group_of(module: str, group: str) -> None:
    assert group_of(module) == group


def test_median_self_times_count_a_module_missing_from_a_run_as_zero() -> None:
    runs = [
        [ImportCost("a", 10, 10, 0), ImportCost("yaml", 4, 4, 0)],
        [ImportCost("a", 30, 30, 0)],
        [ImportCost("a", 20, 20, 0), ImportCost("yaml", 6, 6, 0)],
    ]
    medians = median_self_times(runs)
    assert medians == {"a": 20, "yaml": 4}
    assert by_group(medians) == {"standard library and other": 20, "yaml": 4}


def test_a_part_takes_only_its_side_of_the_mark_in_each_run() -> None:
    runs = [
        [ImportCost("a", 10, 10, 0), ImportCost("b", 7, 7, 0, "t", True)],
        [ImportCost("a", 5, 5, 0, "t", True), ImportCost("b", 9, 9, 0, "t", True, True)],
    ]
    before = Part.of("before", runs, after_streaming=False)
    after = Part.of("after", runs, after_streaming=True)
    assert before.self_times == {"a": 5}
    assert after.self_times == {"a": 2.5, "b": 8}
    assert after.overlapped == frozenset({"b"})


def test_wrapped_runs_a_console_script_or_a_module() -> None:
    script = Layout("image", ("/venv/bin/hcs-deviceplugin",), "/venv/bin/python")
    assert wrapped(script, ["/venv/bin/hcs-deviceplugin", "run", "-x"]) == [
        "/venv/bin/python", "-c", WRAPPER, "script", "/venv/bin/hcs-deviceplugin", "run", "-x",
    ]  # fmt: skip
    module = Layout("checkout", ("/py", "-m", "hcs_deviceplugin"), "/py")
    assert wrapped(module, ["/py", "-m", "hcs_deviceplugin", "run"]) == [
        "/py", "-c", WRAPPER, "-m", "hcs_deviceplugin", "run",
    ]  # fmt: skip


SCRIPT = """\
import sys, threading
import json
worker = threading.Thread(target=lambda: __import__("csv"), name="worker 1")
worker.start()
worker.join()
print(sys.argv[1:], __name__, file=sys.stdout)
"""


def test_the_wrapper_runs_the_script_as_itself_and_names_each_import_s_thread(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, "script", str(script), "run", "--flag"],
        capture_output=True, text=True, env=env, check=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.stdout == "['run', '--flag'] __main__\n"
    threads = {cost.module: cost.thread for cost in parse_importtime(done.stderr)}
    assert threads["json"] == "MainThread"
    assert threads["csv"] == "worker 1"
