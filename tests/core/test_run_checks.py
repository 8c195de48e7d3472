"""``run``'s checks of --vendors and --backend-option against the installed backends (pure functions)."""

from __future__ import annotations

import logging
import re

import pytest

from hcs_deviceplugin.cli import UsageError, check_backend_options, enabled_backends, parse_backend_options

INSTALLED = ["ascend", "nvidia", "simulated"]

# name: (--vendors, expected backends or the error it raises)
VENDORS: dict[str, tuple[str, list[str] | str]] = {
    "default: every hardware backend": ("", ["ascend", "nvidia"]),
    "named": ("nvidia", ["nvidia"]),
    "spaces and empty items": (" nvidia, ,simulated ", ["nvidia", "simulated"]),
    "unknown": ("nvidia,nvidai", "--vendors: unknown vendors ['nvidai']"),
}


@pytest.mark.parametrize("case", sorted(VENDORS))
def test_enabled_backends(case: str) -> None:
    vendors, expected = VENDORS[case]
    if isinstance(expected, str):
        with pytest.raises(UsageError, match=re.escape(expected)):
            enabled_backends(vendors, INSTALLED)
    else:
        assert enabled_backends(vendors, INSTALLED) == expected


def test_no_hardware_backend_installed_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no hardware backend is installed"):
        enabled_backends("", ["simulated"])


def test_an_option_for_a_backend_not_installed_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--backend-option names nvidai: no such backend"):
        check_backend_options(parse_backend_options(["nvidai.library=x"]), ["nvidia"], INSTALLED)


def test_an_option_for_a_backend_not_enabled_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        check_backend_options(parse_backend_options(["ascend.a=1", "nvidia.b=2"]), ["nvidia"], INSTALLED)
    assert [r.getMessage() for r in caplog.records] == [
        "--backend-option for ascend ignored: that backend is not enabled (--vendors)"
    ]


@pytest.mark.parametrize("item", ["nvidia", "nvidia=1", ".key=1", "nvidia.=1"])
def test_a_malformed_option_is_a_usage_error(item: str) -> None:
    with pytest.raises(UsageError, match=r"expected NAME\.KEY=VALUE"):
        parse_backend_options([item])


def test_options_group_by_backend_and_keep_equals_in_values() -> None:
    assert parse_backend_options(["a.x=1", "a.y=p=q", "b.z="]) == {
        "a": {"x": "1", "y": "p=q"},
        "b": {"z": ""},
    }
