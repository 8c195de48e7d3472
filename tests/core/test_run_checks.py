"""``run``'s checks of --vendors and --backend-option against the installed backends (pure functions)."""

from __future__ import annotations

import logging
import re

import pytest

from hcs_deviceplugin.cli import (
    UsageError,
    build_parser,
    check_backend_options,
    enabled_backends,
    parse_arguments,
    parse_backend_options,
)

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


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["run", "--vendors", "simulated", "--metrics-port", "9100"], id="run"),
        pytest.param(["validate-config", "pools.yaml"], id="another-command"),
    ],
)
def test_a_command_line_reads_the_same_with_only_its_own_parser_built(argv: list[str]) -> None:
    """``run`` builds only its own parser: what it reads is what the whole command line reads."""
    whole = vars(build_parser({}).parse_args(argv))
    read = vars(parse_arguments(argv, {}))
    read.pop("from_environment", None)
    assert read == whole


def test_help_lists_every_command_and_run_help_is_runs_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--help"], {})
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("run", "simulate", "inspect", "validate-config"))
    with pytest.raises(SystemExit):
        parse_arguments(["run", "--help"], {})
    assert "--metrics-port" in capsys.readouterr().out
