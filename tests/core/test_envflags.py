"""``run``'s flags from ``HCS_`` environment variables: the variable when the flag is not given."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from hcs_deviceplugin import cli, envflags

ROOT = Path(__file__).resolve().parents[2]


def run_parser() -> argparse.ArgumentParser:
    return cli._subparser(cli.build_parser(), "run")


def flags() -> list[argparse.Action]:
    return [a for a in run_parser()._actions if envflags.variable_name(a) is not None]


# name: (command line after "run", environment, attribute, expected value)
CASES: dict[str, tuple[list[str], dict[str, str], str, object]] = {
    "path from the variable": ([], {"HCS_POOLS_DIR": "/p"}, "pools_dir", Path("/p")),
    "the flag wins": (["--pools-dir", "/q"], {"HCS_POOLS_DIR": "/p"}, "pools_dir", Path("/q")),
    "the flag wins with its default value": (
        ["--log-level", "info"],
        {"HCS_LOG_LEVEL": "debug"},
        "log_level",
        "info",
    ),
    "int converted": ([], {"HCS_METRICS_PORT": "9100"}, "metrics_port", 9100),
    "float converted": ([], {"HCS_POD_RESOURCES_INTERVAL": "0.5"}, "pod_resources_interval", 0.5),
    "level in any case": ([], {"HCS_LOG_LEVEL": "DEBUG"}, "log_level", "debug"),
    "choice": ([], {"HCS_LOG_FORMAT": "json"}, "log_format", "json"),
    "switch on": ([], {"HCS_IN_CLUSTER": "true"}, "in_cluster", True),
    "switch off": ([], {"HCS_IN_CLUSTER": "0"}, "in_cluster", False),
    "switch from the flag": (["--node-labels"], {"HCS_NODE_LABELS": "false"}, "node_labels", True),
    "empty counts as unset": ([], {"HCS_KUBECONFIG": ""}, "kubeconfig", None),
    "repeated items split on whitespace": (
        [],
        {"HCS_BACKEND_OPTION": "a.b=1,2  c.d=x\ne.f="},
        "backend_option",
        ["a.b=1,2", "c.d=x", "e.f="],
    ),
    "repeated flag replaces the variable": (
        ["--backend-option", "z.y=1"],
        {"HCS_BACKEND_OPTION": "a.b=1"},
        "backend_option",
        ["z.y=1"],
    ),
    "node name over NODE_NAME": ([], {"HCS_NODE_NAME": "n1", "NODE_NAME": "n2"}, "node_name", "n1"),
    "custom type checked": (
        [],
        {"HCS_GPU_TYPE_LABEL": "example.com/gpu"},
        "gpu_type_label",
        "example.com/gpu",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_flags_from_the_environment(case: str) -> None:
    argv, environ, dest, expected = CASES[case]
    args = cli.parse_arguments(["run", *argv], environ)
    assert getattr(args, dest) == expected


BAD: dict[str, tuple[dict[str, str], str]] = {
    "not an int": ({"HCS_METRICS_PORT": "http"}, "HCS_METRICS_PORT='http': 'http' is not a port number"),
    "not a float": (
        {"HCS_POD_RESOURCES_INTERVAL": "soon"},
        "HCS_POD_RESOURCES_INTERVAL='soon': 'soon' is not a number of seconds",
    ),
    "not a choice": ({"HCS_LOG_FORMAT": "xml"}, "HCS_LOG_FORMAT='xml': expected one of text, json"),
    "not a switch": ({"HCS_IN_CLUSTER": "maybe"}, "HCS_IN_CLUSTER='maybe': expected true or false"),
    "not a label key": (
        {"HCS_GPU_TYPE_LABEL": "a b"},
        "HCS_GPU_TYPE_LABEL='a b': 'a b' is not a valid label key",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_variable_is_a_usage_error_naming_it(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    environ, expected = BAD[case]
    with pytest.raises(SystemExit) as exited:
        cli.parse_arguments(["run"], environ)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("hcs-deviceplugin: error: ") and expected in err and err.count("\n") == 1, err


def test_variables_are_read_only_for_run() -> None:
    """A DaemonSet's environment must not break ``validate-config`` run in the same container."""
    args = cli.parse_arguments(["validate-config", "x.yaml"], {"HCS_METRICS_PORT": "http"})
    assert args.paths == ["x.yaml"]


def test_every_run_flag_has_a_variable_named_in_its_help_and_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    table = {m.group(1) for m in re.finditer(r"`(HCS_[A-Z_]+)`", readme)}
    help_text = " ".join(run_parser().format_help().split())
    for action in flags():
        name = envflags.variable_name(action)
        assert name is not None
        long = next(o for o in action.option_strings if o.startswith("--"))
        assert name == "HCS_" + long[2:].upper().replace("-", "_")
        assert f"[env {name}]" in help_text, name
        assert name in table, f"{name} missing from README's flag table"
    assert (
        len(flags())
        == len([a for a in run_parser()._actions if any(o.startswith("--") for o in a.option_strings)]) - 1
    ), "every flag but --help has a variable"


def test_help_and_version_have_no_variable() -> None:
    parser = cli.build_parser()
    assert all(
        envflags.variable_name(a) is None
        for a in parser._actions
        if isinstance(a, argparse._HelpAction | argparse._VersionAction)
    )


def test_node_name_and_namespace_fall_back_to_the_downward_api_variables() -> None:
    args = cli.parse_arguments(["run"], {"NODE_NAME": "n2", "POD_NAMESPACE": "ns"})
    assert (args.node_name, args.kube_namespace) == ("n2", "ns")


VALUED = [a for a in flags() if not isinstance(a, argparse._StoreTrueAction | argparse._AppendAction)]


def _outcome(argv: list[str], environ: dict[str, str]) -> object:
    """The parsed value of every flag, or that parsing was refused (status 2)."""
    try:
        parsed = vars(cli.parse_arguments(["run", *argv], environ))
        del parsed["from_environment"]  # which source gave each value: the only thing that differs
        return parsed
    except SystemExit as exited:
        assert exited.code == 2
        return "refused"


@pytest.mark.parametrize("action", VALUED, ids=lambda a: a.dest)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1))
@example(text="--")  # argparse drops a bare "--" from "--flag=--": both forms are refused
def test_a_variable_reads_exactly_as_its_flag(
    action: argparse.Action, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the text, ``HCS_X=text`` parses to what ``--x=text`` does, or both are refused."""
    assume(text.strip())
    long = next(o for o in action.option_strings if o.startswith("--"))
    name = envflags.variable_name(action)
    assert name is not None
    assert _outcome([f"{long}={text}"], {}) == _outcome([], {name: text})
    capsys.readouterr()


MENTIONS: dict[str, tuple[str, dict[str, str], str]] = {
    "named after the flag": (
        "--pools-dir /x: no such directory",
        {"--pools-dir": "HCS_POOLS_DIR"},
        "--pools-dir (HCS_POOLS_DIR) /x: no such directory",
    ),
    "only the first mention": ("--a and --a", {"--a": "HCS_A"}, "--a (HCS_A) and --a"),
    "not inside a longer flag": (
        "--metrics-address/--metrics-port x",
        {"--metrics-port": "HCS_METRICS_PORT"},
        "--metrics-address/--metrics-port (HCS_METRICS_PORT) x",
    ),
    "not a prefix of another flag": (
        "--kube-namespace is needed",
        {"--kube": "HCS_KUBE"},
        "--kube-namespace is needed",
    ),
    "nothing taken": ("--pools-dir /x", {}, "--pools-dir /x"),
}


@pytest.mark.parametrize("case", sorted(MENTIONS))
def test_mention_variables(case: str) -> None:
    message, taken, expected = MENTIONS[case]
    assert envflags.mention_variables(message, taken) == expected


def test_the_flags_taken_from_the_environment_are_recorded() -> None:
    args = cli.parse_arguments(
        ["run", "--vendors", "simulated"],
        {"HCS_POOLS_DIR": "/p", "HCS_VENDORS": "nvidia", "HCS_LOG_LEVEL": "info"},
    )
    assert args.from_environment == {"--pools-dir": "HCS_POOLS_DIR"}, (
        "given flags and defaults are not credited"
    )
