"""The entry-point reader: the PyPA file format, and the same answer as importlib.metadata."""

from __future__ import annotations

from importlib import metadata

import pytest

from hcs_deviceplugin.entrypoints import EntryPoint, entry_points, parse_entry_points

FILE = """
[console_scripts]
tool = pkg.cli:main

[hcs_deviceplugin.vendors]
# a comment
alpha = vendors.alpha:create_backend
beta=vendors.beta:Factory.create [extra]
; another comment
  gamma  =  vendors.gamma:create_backend
not an entry

[other]
alpha = elsewhere:thing
"""


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        (
            "hcs_deviceplugin.vendors",
            [
                ("alpha", "vendors.alpha:create_backend"),
                ("beta", "vendors.beta:Factory.create [extra]"),
                ("gamma", "vendors.gamma:create_backend"),
            ],
        ),
        ("console_scripts", [("tool", "pkg.cli:main")]),
        ("other", [("alpha", "elsewhere:thing")]),
        ("missing", []),
    ],
)
def test_parse_reads_one_section(group: str, expected: list[tuple[str, str]]) -> None:
    assert [(e.name, e.value) for e in parse_entry_points(FILE, group)] == expected


@pytest.mark.parametrize(
    "group", ["hcs_deviceplugin.vendors", "hcs_deviceplugin.fake_hardware", "console_scripts", "pytest11"]
)
def test_the_installed_groups_match_importlib_metadata(group: str) -> None:
    ours = sorted((e.name, e.value) for e in entry_points(group))
    theirs = sorted((e.name, e.value) for e in metadata.entry_points(group=group))
    assert ours == theirs


def test_load_follows_a_dotted_attribute_and_ignores_extras() -> None:
    assert EntryPoint("j", "json:JSONDecoder.decode [x]").load() is __import__("json").JSONDecoder.decode
