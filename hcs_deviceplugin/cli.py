"""``hcs-deviceplugin`` command line: ``run`` on a real node, ``simulate`` on the embedded default.

The names of hardware vendors never appear here: ``run`` enables every installed backend unless
``--vendors`` narrows the list, and backends that find no hardware report themselves absent.
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
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from hcs_deviceplugin import __version__
from hcs_deviceplugin.backend import available_backend_names
from hcs_deviceplugin.logsetup import configure_logging
from hcs_deviceplugin.observability.nodelabels import DEFAULT_GPU_TYPE_KEY, is_label_key

DEFAULT_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
DEFAULT_POOLS_DIR = Path("/etc/hcs-deviceplugin/pools")
DEFAULT_STATE_DIR = Path("/var/lib/hcs-deviceplugin")
SIMULATED_BACKEND = "simulated"


def parse_backend_options(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``name.key=value`` items → {name: {key: value}}; a malformed item is a usage error."""
    options: dict[str, dict[str, str]] = {}
    for item in items:
        name_key, sep, value = item.partition("=")
        backend, dot, key = name_key.partition(".")
        if not sep or not dot or not backend or not key:
            raise argparse.ArgumentTypeError(f"--backend-option {item!r}: expected NAME.KEY=VALUE")
        options.setdefault(backend, {})[key] = value
    return options


def _add_run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="serve this node's accelerators to kubelet")
    run.add_argument("--plugin-dir", type=Path, default=DEFAULT_PLUGIN_DIR, help="kubelet device-plugins dir")
    run.add_argument("--pools-dir", type=Path, default=DEFAULT_POOLS_DIR, help="mounted pool ConfigMap dir")
    run.add_argument("--host-root", type=Path, default=Path("/"), help="prefix for host paths (/sys, /dev)")
    run.add_argument(
        "--vendors",
        default="",
        help="comma-separated backends to enable (default: every installed hardware backend)",
    )
    run.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME") or socket.gethostname(), help="this node's name"
    )
    run.add_argument(
        "--pod-resources-socket",
        type=Path,
        default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        help="kubelet pod-resources socket, to learn which devices running containers hold",
    )
    run.add_argument("--pod-resources-interval", type=float, default=5.0, help="seconds between polls")
    run.add_argument(
        "--allocation-settle-seconds",
        type=float,
        default=2.0,
        help="how long a card just handed out counts as held before pod-resources must show it",
    )
    run.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="where the daemon remembers which pool advertised each card, for a safe restart",
    )
    run.add_argument("--backend-option", action="append", default=[], metavar="NAME.KEY=VALUE")
    run.add_argument("--log-format", choices=("text", "json"), default="text")
    run.add_argument("--log-level", default="info")
    run.add_argument(
        "--metrics-address", default="0.0.0.0", help="address of /metrics /healthz /readyz /report"
    )
    run.add_argument("--metrics-port", type=int, default=8080)
    api = run.add_argument_group("Kubernetes API pool source (optional; the mounted directory always works)")
    api.add_argument("--in-cluster", action="store_true", help="watch pool ConfigMaps with the pod's account")
    api.add_argument(
        "--kubeconfig", type=Path, default=None, help="watch pool ConfigMaps with this kubeconfig"
    )
    api.add_argument(
        "--kube-namespace", default=os.environ.get("POD_NAMESPACE", ""), help="ConfigMap namespace"
    )
    api.add_argument(
        "--kube-label-selector",
        default="app.kubernetes.io/part-of=hcs-deviceplugin",
        help="which ConfigMaps hold pools",
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


def _label_key(text: str) -> str:
    """argparse type: a label key the apiserver accepts, so a typo fails at start, not every round."""
    if not is_label_key(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid label key ([prefix/]name)")
    return text


def _add_simulate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser("simulate", help="run the daemon on a simulated node with a kubelet simulator")
    sim.add_argument("--once", action="store_true", help="run the scenario, print the final state, exit")
    sim.add_argument("--node", type=Path, default=None, help="simulated node description (YAML)")
    sim.add_argument(
        "--hardware",
        choices=("simulated", "fake"),
        default="simulated",
        help="simulated: the simulated backend; fake: every vendor's real backend on its fake hardware",
    )
    sim.add_argument("--step-seconds", type=float, default=1.5, help="pause between scenario steps")
    sim.add_argument("--log-level", default="warning")


def _add_tool_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from hcs_deviceplugin.observability import inspect as inspect_command

    inspect = sub.add_parser("inspect", help="show the node report of a running daemon")
    inspect_command.add_arguments(inspect)
    check = sub.add_parser("validate-config", help="check pool ConfigMaps offline, as the daemon would")
    check.add_argument(
        "paths", nargs="+", metavar="FILE", help="YAML files, ConfigMap manifests or directories"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hcs-deviceplugin", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub)
    _add_simulate_parser(sub)
    _add_tool_parsers(sub)
    return parser


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


def command_run(args: argparse.Namespace) -> int:
    configure_logging(args.log_format, args.log_level)
    try:
        options = parse_backend_options(args.backend_option)
    except argparse.ArgumentTypeError as exc:
        print(f"hcs-deviceplugin: {exc}", file=sys.stderr)
        return 2
    installed = available_backend_names()
    names = [n.strip() for n in args.vendors.split(",") if n.strip()] or [
        n for n in installed if n != SIMULATED_BACKEND
    ]
    unknown = sorted(set(names) - set(installed))
    if unknown:
        print(f"hcs-deviceplugin: unknown vendors {unknown}; installed: {installed}", file=sys.stderr)
        return 2
    if args.node_labels and not (args.in_cluster or args.kubeconfig):
        print("hcs-deviceplugin: --node-labels needs --in-cluster or --kubeconfig", file=sys.stderr)
        return 2
    if args.watch_node and not (args.in_cluster or args.kubeconfig):
        print("hcs-deviceplugin: --watch-node needs --in-cluster or --kubeconfig", file=sys.stderr)
        return 2
    config_labels: dict[str, str] = {}
    for item in args.node_config_label:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"hcs-deviceplugin: --node-config-label {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        config_labels[key.strip()] = value.strip()
    if (args.in_cluster or args.kubeconfig) and not args.kube_namespace:
        print(
            "hcs-deviceplugin: --kube-namespace (or POD_NAMESPACE) is needed for the API source",
            file=sys.stderr,
        )
        return 2
    from hcs_deviceplugin.runner import ApiSettings, Runner, RunSettings

    api = (
        ApiSettings(args.kube_namespace, args.kube_label_selector, args.in_cluster, args.kubeconfig)
        if args.in_cluster or args.kubeconfig
        else None
    )
    runner = Runner(
        RunSettings(
            plugin_dir=args.plugin_dir,
            pools_dir=args.pools_dir,
            host_root=args.host_root,
            vendors=tuple(names),
            node_name=args.node_name,
            pod_resources_socket=args.pod_resources_socket,
            pod_resources_interval=args.pod_resources_interval,
            allocation_settle_seconds=args.allocation_settle_seconds,
            state_dir=args.state_dir,
            backend_options=options,
            metrics_address=args.metrics_address,
            metrics_port=args.metrics_port,
            api=api,
            node_labels=args.node_labels,
            gpu_type_label=args.gpu_type_label,
            node_config_labels=config_labels,
            watch_node=args.watch_node,
        )
    )
    signals = SignalWaiter(runner.stop_event)
    runner.start()
    signum = signals.wait()
    runner.stop(signal.Signals(signum).name)
    exit_now(0)
    return 0


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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return command_run(args)
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
