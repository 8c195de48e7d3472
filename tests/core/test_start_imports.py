"""The import profile of ``bench.start_imports``: reading ``-X importtime`` and adding it up."""

from __future__ import annotations

import pytest

from bench.start_imports import ImportCost, by_group, group_of, median_self_times, parse_importtime

CAPTURE = """\
import time: self [us] | cumulative | imported package
import time:       844 |        844 |   _io
import time:      1005 |       2190 | _frozen_importlib_external
hcs-deviceplugin: error: a stray stderr line
import time:     17389 |      17389 |     hcs_deviceplugin.model
import time:      1511 |      31751 |   hcs_deviceplugin.backend
"""


def test_parse_importtime_reads_the_lines_and_skips_the_rest() -> None:
    assert parse_importtime(CAPTURE) == [
        ImportCost("_io", 844, 844, 1),
        ImportCost("_frozen_importlib_external", 1005, 2190, 0),
        ImportCost("hcs_deviceplugin.model", 17389, 17389, 2),
        ImportCost("hcs_deviceplugin.backend", 1511, 31751, 1),
    ]


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
        ("waitress.server", "waitress (once the pools are served)"),
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
