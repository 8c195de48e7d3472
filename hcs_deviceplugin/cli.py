"""``hcs-deviceplugin`` command line: ``run`` on a real node, ``simulate`` on the embedded default.

The names of hardware vendors never appear here: ``run`` enables every installed backend unless
``--vendors`` narrows the list, and backends that find no hardware report themselves absent.

Every mistake an operator can make on the command line or in the environment ends the same way:
one line ``hcs-deviceplugin: error: ...`` on stderr naming the flag (or ``HCS_`` variable) at
fault, and exit status 2, never a traceback. Each of ``run``'s flags can also be set through the
environment (:mod:`hcs_deviceplugin.envflags`).

Heavy packages (kubernetes, grpc) are imported only by the command that uses
them, so that ``--help``, ``validate-config`` and a refused start stay fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from hcs_deviceplugin import __version__, envflags
from hcs_deviceplugin.backend import available_backend_names
from hcs_deviceplugin.heap import defer_collection, resume_collection, settle_when
from hcs_deviceplugin.lazyre import LazyPattern
from hcs_deviceplugin.logsetup import LOG_LEVELS, configure_logging
from hcs_deviceplugin.observability.labelkeys import DEFAULT_GPU_TYPE_KEY, is_label_key

if TYPE_CHECKING:
    from hcs_deviceplugin.runner import RunSettings

DEFAULT_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
DEFAULT_POOLS_DIR = Path("/etc/hcs-deviceplugin/pools")
DEFAULT_STATE_DIR = Path("/var/lib/hcs-deviceplugin")
DEFAULT_CDI_DIR = "/var/run/cdi"
DEFAULT_DRA_PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
DEFAULT_DRA_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")
_DNS_SUBDOMAIN = LazyPattern(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
SIMULATED_BACKEND = "simulated"
PROG = "hcs-deviceplugin"
EXIT_USAGE = 2
DEFAULT_LABEL_SELECTOR = "app.kubernetes.io/name=hcs-deviceplugin,app.kubernetes.io/component=pools"
"""The labels the chart puts on its pools ConfigMap (templates/_helpers.tpl, ``hcs-deviceplugin.labels``
with ``app.kubernetes.io/component: pools``), so ``--in-cluster`` alone finds it."""


class UsageError(Exception):
    """A setting that cannot work, found before anything starts; the message names the flag."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (``hcs-deviceplugin: error: ...``) and status 2.

    argparse prints the usage text before the error; in a pod's log that buries the one line that
    says what is wrong, and ``--help`` is one command away.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message} (see {self.prog} --help)\n")


def fail(message: str) -> int:
    """Print ``message`` as the one error line and return the usage status."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def parse_backend_options(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``name.key=value`` items → {name: {key: value}}; a malformed item is a :class:`UsageError`."""
    options: dict[str, dict[str, str]] = {}
    for item in items:
        name_key, sep, value = item.partition("=")
        backend, dot, key = name_key.partition(".")
        if not sep or not dot or not backend or not key:
            raise UsageError(f"--backend-option {item!r}: expected NAME.KEY=VALUE")
        options.setdefault(backend, {})[key] = value
    return options


def _log_level(text: str) -> str:
    """argparse type: a level name in any case (``WARN`` too), so a typo fails before logging starts."""
    level = text.strip().lower()
    level = "warning" if level == "warn" else level
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log level (one of {', '.join(LOG_LEVELS)})")
    return level


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 to 65535 (0 lets the kernel pick one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def _seconds(text: str) -> float:
    """argparse type: a duration in seconds, finite and not negative."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= seconds < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return seconds


def _positive_seconds(text: str) -> float:
    """argparse type: a duration in seconds above 0 (an interval)."""
    seconds = _seconds(text)
    if seconds == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0 seconds")
    return seconds


def _add_run_parser(
    sub: argparse._SubParsersAction[_Parser], environ: Mapping[str, str]
) -> argparse.ArgumentParser:
    run = sub.add_parser(
        "run",
        help="serve this node's accelerators to kubelet",
        description="Each flag can also be set as the environment variable named in its help "
        "(HCS_ and the flag's name); a flag given wins.",
    )
    run.add_argument("--plugin-dir", type=Path, default=DEFAULT_PLUGIN_DIR, help="kubelet device-plugins dir")
    run.add_argument(
        "--pools-dir",
        type=Path,
        default=DEFAULT_POOLS_DIR,
        help="mounted pool ConfigMap dir; must exist unless an API source is given",
    )
    run.add_argument("--host-root", type=Path, default=Path("/"), help="prefix for host paths (/sys, /dev)")
    run.add_argument(
        "--vendors",
        default="",
        help="comma-separated backends to enable (default: every installed hardware backend)",
    )
    run.add_argument(
        "--node-name",
        default=environ.get("NODE_NAME") or socket.gethostname(),
        help="this node's name (default: $NODE_NAME, else the hostname)",
    )
    run.add_argument(
        "--pod-resources-socket",
        type=Path,
        default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        help="kubelet pod-resources socket, to learn which devices running containers hold",
    )
    run.add_argument(
        "--pod-resources-interval", type=_positive_seconds, default=5.0, help="seconds between polls"
    )
    run.add_argument(
        "--allocation-settle-seconds",
        type=_seconds,
        default=2.0,
        help="how long a card just handed out counts as held before pod-resources must show it",
    )
    run.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="where the daemon remembers which pool advertised each card, for a safe restart",
    )
    run.add_argument(
        "--cdi-dir",
        default=DEFAULT_CDI_DIR,
        help="where to write this node's CDI specs (hcs-deviceplugin-<vendor>.json); empty: write none",
    )
    run.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="an option of one backend; repeat for more (in the variable: separated by spaces)",
    )
    run.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="log lines for people or machines"
    )
    run.add_argument("--log-level", type=_log_level, default="info", help=", ".join(LOG_LEVELS))
    run.add_argument(
        "--metrics-address", default="0.0.0.0", help="address of /metrics /healthz /readyz /report"
    )
    run.add_argument("--metrics-port", type=_port, default=8080, help="port of the same (0: any free one)")
    run.add_argument(
        "--report-access",
        choices=("local", "any", "off"),
        default="local",
        help="who may read /report, which names the pods holding each device: loopback clients "
        "(kubectl exec, port-forward; default), any client of the metrics port, or nobody",
    )
    api = run.add_argument_group("Kubernetes API pool source (optional; with it --pools-dir may be absent)")
    api.add_argument("--in-cluster", action="store_true", help="watch pool ConfigMaps with the pod's account")
    api.add_argument(
        "--kubeconfig", type=Path, default=None, help="watch pool ConfigMaps with this kubeconfig"
    )
    api.add_argument(
        "--kube-namespace",
        default=environ.get("POD_NAMESPACE", ""),
        help="ConfigMap namespace (default: $POD_NAMESPACE)",
    )
    api.add_argument(
        "--kube-label-selector",
        default=DEFAULT_LABEL_SELECTOR,
        help="which ConfigMaps hold pools (default: the chart's pools ConfigMap labels, %(default)s)",
    )
    node = run.add_argument_group("This node's labels, for the DKP NodeGroup format (a label picks a config)")
    node.add_argument(
        "--node-config-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label of this node as the pool formats see it (repeatable); wins over the watched Node",
    )
    node.add_argument(
        "--watch-node",
        action="store_true",
        help="watch this Node's labels through the API (with --in-cluster or --kubeconfig)",
    )
    dra = run.add_argument_group(
        "Dynamic Resource Allocation (optional: serves api: dra pools; needs --in-cluster or --kubeconfig)"
    )
    dra.add_argument(
        "--dra-driver",
        default="",
        help="DRA driver name to register and publish ResourceSlices under (e.g. gpu.deckhouse.io); "
        "empty: no DRA front end",
    )
    dra.add_argument(
        "--dra-plugins-dir",
        type=Path,
        default=DEFAULT_DRA_PLUGINS_DIR,
        help="kubelet plugins dir (DRA socket)",
    )
    dra.add_argument(
        "--dra-registry-dir",
        type=Path,
        default=DEFAULT_DRA_REGISTRY_DIR,
        help="kubelet plugins_registry dir (registration socket)",
    )
    labels = run.add_argument_group("Node labels (optional; need --in-cluster or --kubeconfig)")
    labels.add_argument(
        "--node-labels",
        action="store_true",
        help="label this Node with its accelerators (hcs.deckhouse.io/<vendor>.present/.count/.product)",
    )
    labels.add_argument(
        "--gpu-type-label",
        type=_label_key,
        default=DEFAULT_GPU_TYPE_KEY,
        help="key of the label that carries the node's most common model (default: %(default)s)",
    )
    envflags.document(run)
    return run


def _label_key(text: str) -> str:
    """argparse type: a label key the apiserver accepts, so a typo fails at start, not every round."""
    if not is_label_key(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid label key ([prefix/]name)")
    return text


def _add_simulate_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    sim = sub.add_parser("simulate", help="run the daemon on a simulated node with a kubelet simulator")
    sim.add_argument("--once", action="store_true", help="run the scenario, print the final state, exit")
    sim.add_argument("--node", type=Path, default=None, help="simulated node description (YAML)")
    sim.add_argument(
        "--hardware",
        choices=("simulated", "fake"),
        default="simulated",
        help="simulated: the simulated backend; fake: every vendor's real backend on its fake hardware",
    )
    sim.add_argument("--step-seconds", type=_seconds, default=1.5, help="pause between scenario steps")
    sim.add_argument("--log-level", type=_log_level, default="warning", help=", ".join(LOG_LEVELS))


def _add_tool_parsers(sub: argparse._SubParsersAction[_Parser]) -> None:
    from hcs_deviceplugin.observability import inspect as inspect_command

    inspect = sub.add_parser("inspect", help="show the node report of a running daemon")
    inspect_command.add_arguments(inspect)
    check = sub.add_parser("validate-config", help="check pool ConfigMaps offline, as the daemon would")
    check.add_argument(
        "paths", nargs="+", metavar="FILE", help="YAML files, ConfigMap manifests or directories"
    )


def build_parser(environ: Mapping[str, str] | None = None, only_run: bool = False) -> argparse.ArgumentParser:
    """The whole command line; ``environ`` (default ``os.environ``) gives NODE_NAME and POD_NAMESPACE.

    ``only_run``: the ``run`` command alone, for a command line that starts with ``run`` (argparse
    reads everything after it with ``run``'s parser): the other commands' parsers, and what they
    load, would be a start's waste.
    """
    parser = _Parser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub, os.environ if environ is None else environ)
    if not only_run:
        _add_simulate_parser(sub)
        _add_tool_parsers(sub)
    return parser


def parse_arguments(argv: Sequence[str] | None, environ: Mapping[str, str]) -> argparse.Namespace:
    """The command line, with ``run``'s flags not given taken from their ``HCS_`` variables.

    The command line is read first on its own, so that ``--help`` and a mistyped flag are answered
    whatever the environment holds, and the variables are read only for ``run``; its namespace's
    ``from_environment`` maps each flag whose value came from a variable to that variable.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(environ, only_run=arguments[:1] == ["run"])
    args = parser.parse_args(arguments)
    if args.command != "run":
        return args
    run = _subparser(parser, "run")
    refuse_bare_separator(run, args)
    try:
        args, taken = envflags.apply_environment(run, arguments, args, environ, parser.parse_args)
    except envflags.EnvironmentValueError as exc:
        run.error(str(exc))
    args.from_environment = taken
    return args


def refuse_bare_separator(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--flag=--``: argparse drops a value that is exactly ``--`` and stores ``[]``, which
    no flag means; its ``HCS_`` variable set to ``--`` is refused the same way."""
    for action in parser._actions:
        single = (
            action.option_strings and action.nargs is None and not isinstance(action, argparse._AppendAction)
        )
        if single and getattr(args, action.dest, None) == []:
            parser.error(f"{action.option_strings[-1]}: '--' is not a value")


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise KeyError(name)


class SignalWaiter:
    """SIGTERM and SIGINT end the run; SIGHUP is logged and ignored.

    Installed before anything starts, so a signal during a long start (waiting for another
    instance's lock) is honoured: ``stopping`` is set at once and the start gives up. SIGHUP would
    otherwise kill the process without cleanup; there is nothing to reload, because pools already
    follow the ConfigMap live.
    """

    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping
        self.received: list[int] = []
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGHUP, self._hangup)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        self.stopping.set()

    @staticmethod
    def _hangup(_signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("hcs_deviceplugin").info(
            "SIGHUP ignored: pools follow the ConfigMap live, there is nothing to reload"
        )

    def wait(self) -> int:
        """Block until SIGTERM or SIGINT; returns the signal number.

        The kernel may deliver the signal to any thread, and Python runs handlers only in the main
        thread when it next executes bytecode; a main thread asleep in a lock wait would notice a
        second later. So the main thread sleeps in ``select`` on the wakeup fd, which every signal
        writes to, and runs the handler at once.
        """
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd)
        try:
            while not self.stopping.is_set():
                ready, _, _ = select.select([read_fd], [], [], 1.0)
                if ready:
                    os.read(read_fd, 512)
        finally:
            signal.set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
        return self.received[0] if self.received else signal.SIGTERM


def enabled_backends(vendors: str, installed: Sequence[str]) -> list[str]:
    """The backends ``--vendors`` names, or every installed hardware backend; UsageError if none."""
    names = [n.strip() for n in vendors.split(",") if n.strip()]
    if not names:
        names = [n for n in installed if n != SIMULATED_BACKEND]
        if not names:
            raise UsageError(
                f"no hardware backend is installed (installed: {list(installed)}); name one with --vendors"
            )
    unknown = sorted(set(names) - set(installed))
    if unknown:
        raise UsageError(f"--vendors: unknown vendors {unknown}; installed: {list(installed)}")
    return names


def check_backend_options(
    options: Mapping[str, object], enabled: Sequence[str], installed: Sequence[str]
) -> None:
    """A ``--backend-option`` for a backend that is not installed is a typo: UsageError.

    One for a backend installed but not enabled is only logged: a chart may keep a vendor's options
    while the vendor is switched off. Each backend checks its own keys when it is created.
    """
    unknown = sorted(set(options) - set(installed))
    if unknown:
        names, known = ", ".join(unknown), ", ".join(installed)
        raise UsageError(f"--backend-option names {names}: no such backend (installed: {known})")
    for name in sorted(set(options) - set(enabled)):
        logging.getLogger("hcs_deviceplugin").warning(
            "--backend-option for %s ignored: that backend is not enabled (--vendors)", name
        )


def command_run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT (then the process ends in :func:`exit_now`); the usage status
    for a start refused."""
    configure_logging(args.log_format, args.log_level)
    taken: Mapping[str, str] = getattr(args, "from_environment", {})
    try:
        settings = run_settings(args)
    except UsageError as exc:
        return fail(envflags.mention_variables(str(exc), taken))
    from hcs_deviceplugin.runner import Runner, StartError

    try:
        runner = Runner(settings)
        signals = SignalWaiter(runner.stop_event)
        runner.start()
    except StartError as exc:
        return fail(envflags.mention_variables(str(exc), taken))
    # once the pools stream: load the allocator, build the pools' topologies, collect once, then as usual
    settle_when(runner.daemon.wait_streaming, runner.stop_event, runner.daemon.prepare_allocation)
    signum = signals.wait()
    runner.stop(signal.Signals(signum).name)
    exit_now(0)
    return 0


def run_settings(args: argparse.Namespace) -> RunSettings:
    """``run``'s arguments checked against each other and the installed backends; UsageError if not."""
    options = parse_backend_options(args.backend_option)
    installed = available_backend_names()
    names = enabled_backends(args.vendors, installed)
    check_backend_options(options, names, installed)
    if args.in_cluster and args.kubeconfig:
        raise UsageError("--in-cluster and --kubeconfig: give one (the pod's account, or a kubeconfig file)")
    if args.node_labels and not (args.in_cluster or args.kubeconfig):
        raise UsageError("--node-labels needs --in-cluster or --kubeconfig")
    if args.watch_node and not (args.in_cluster or args.kubeconfig):
        raise UsageError("--watch-node needs --in-cluster or --kubeconfig")
    config_labels: dict[str, str] = {}
    for item in args.node_config_label:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--node-config-label {item!r} is not KEY=VALUE")
        config_labels[key.strip()] = value.strip()
    if args.dra_driver and not (args.in_cluster or args.kubeconfig):
        raise UsageError(
            "--dra-driver needs --in-cluster or --kubeconfig (claims and ResourceSlices live in the API)"
        )
    if args.dra_driver and not args.state_dir:
        raise UsageError("--dra-driver needs --state-dir (prepared claims are checkpointed there)")
    if args.dra_driver and _DNS_SUBDOMAIN.fullmatch(args.dra_driver) is None:
        raise UsageError(
            f"--dra-driver {args.dra_driver!r} is not a DNS subdomain (lower case, e.g. gpu.deckhouse.io)"
        )
    if (args.in_cluster or args.kubeconfig) and not args.kube_namespace:
        raise UsageError("--kube-namespace (or POD_NAMESPACE) is needed for the API source")
    from hcs_deviceplugin.runner import RunSettings

    api = None
    if args.in_cluster or args.kubeconfig:
        from hcs_deviceplugin.kubeapi.settings import ApiSettings

        api = ApiSettings(args.kube_namespace, args.kube_label_selector, args.in_cluster, args.kubeconfig)
    return RunSettings(
        plugin_dir=args.plugin_dir,
        pools_dir=args.pools_dir,
        host_root=args.host_root,
        vendors=tuple(names),
        node_name=args.node_name,
        pod_resources_socket=args.pod_resources_socket,
        pod_resources_interval=args.pod_resources_interval,
        allocation_settle_seconds=args.allocation_settle_seconds,
        state_dir=args.state_dir,
        cdi_dir=Path(args.cdi_dir) if args.cdi_dir else None,
        backend_options=options,
        metrics_address=args.metrics_address,
        metrics_port=args.metrics_port,
        report_access=args.report_access,
        api=api,
        node_labels=args.node_labels,
        gpu_type_label=args.gpu_type_label,
        node_config_labels=config_labels,
        watch_node=args.watch_node,
        dra_driver=args.dra_driver,
        dra_plugins_dir=args.dra_plugins_dir,
        dra_registry_dir=args.dra_registry_dir,
    )


def exit_now(status: int) -> None:
    """Leave without the interpreter's exit-time joins, once everything that matters is done.

    By now the sockets are gone, the restart state is on disk and the logs are flushed; what is left
    is gRPC worker threads ending their calls, which the interpreter would wait for (up to a second)
    and which nothing needs. A device plugin's SIGTERM must be served in milliseconds.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run one command; ``environ`` (default ``os.environ``) supplies ``run``'s ``HCS_`` variables.

    The garbage collector waits from here until ``run``'s pools stream (:mod:`hcs_deviceplugin.heap`);
    any other command collects as usual once its command line is read.

    gRPC's core logs its own INFO lines (a GOAWAY on a closed stream) on stderr, around ours and in
    a format of its own; only its errors are for operators. Set before grpc is first imported; a
    ``GRPC_VERBOSITY`` the operator gives wins.
    """
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    defer_collection()  # a run's start-up objects live as long as it does: see heap.py
    try:
        args = parse_arguments(argv, os.environ if environ is None else environ)
        if args.command == "run":
            return command_run(args)  # serving, it never returns: settle() collects once streaming
    finally:
        resume_collection()  # any other command, a refused start or a command line refused
    if args.command == "inspect":
        from hcs_deviceplugin.observability import inspect as inspect_command

        return inspect_command.run(args)
    if args.command == "validate-config":
        from hcs_deviceplugin.pools import validate

        return validate.main(args.paths, sys.stdout, sys.stderr)
    if args.command == "simulate":
        from hcs_deviceplugin.simulation.command import command_simulate

        return command_simulate(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    raise SystemExit(main())
