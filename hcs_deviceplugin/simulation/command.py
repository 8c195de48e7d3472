"""Wiring for ``hcs-deviceplugin simulate``: temp dirs, kubelet simulator, daemon, scenario, view."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

from hcs_deviceplugin.backend import Backend, BackendAbsent, BackendConfig, load_factory
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.dra.frontend import DEFAULT_DRIVER, DraConfig, DraSetup
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.dra import DraKubeletSimulator
from hcs_deviceplugin.logsetup import configure_logging
from hcs_deviceplugin.model import Inventory
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.dra import MemoryClaims, MemorySlices
from hcs_deviceplugin.simulation.hardware import HardwareInjector, prepare_all
from hcs_deviceplugin.simulation.scenario import DraStage, HealthInjector, Scenario, initial_pools
from hcs_deviceplugin.simulation.view import render

SIMULATED_BACKEND = "simulated"
CLEAR = "\x1b[H\x1b[2J"


def command_simulate(args: argparse.Namespace) -> int:
    configure_logging("text", args.log_level)
    stop = threading.Event()
    workdir = Path(tempfile.mkdtemp(prefix="hcs-sim-", dir="/tmp"))
    plugin_dir, pools_dir, cdi_dir = workdir / "dp", workdir / "pools", workdir / "cdi"
    backends, injector_for, host_roots = _backends(args, workdir, stop)
    kubelet = KubeletSimulator(plugin_dir, pod_resources_socket=workdir / "pod-resources.sock")
    kubelet.start()
    inventory = Inventory()
    for backend in backends.values():
        inventory = inventory.merged(backend.discover())
    node = "hcs-sim-node"
    dra, stage = _dra_stage(workdir, node)
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=plugin_dir,
            node_name=node,
            pod_resources_socket=workdir / "pod-resources.sock",
            pod_resources_interval=1.0,
            cdi_dir=cdi_dir,
            backend_host_roots=host_roots,
        ),
        backends,
        dra=dra,
    )
    scenario = Scenario(daemon, kubelet, injector_for(daemon), pools_dir)
    scenario.dra = stage
    scenario.document = initial_pools(inventory, dra=True)
    scenario.write_pools()
    daemon.add_source(lambda on_change: DirectoryPoolSource(pools_dir, on_change))
    live = sys.stdout.isatty() and not args.once
    step_done = threading.Event()
    if not args.once:

        def pause() -> None:
            stop.wait(args.step_seconds)

        scenario.pause = pause
    painter = threading.Thread(
        target=_paint_live, args=(daemon, kubelet, scenario, stop, step_done), daemon=True
    )
    status = 0
    try:
        daemon.start()
        if live:
            painter.start()
        scenario.run()
    except Exception as exc:
        scenario.say(f"FAILED: {exc}")
        status = 1
    finally:
        step_done.set()
        if args.once or status:
            print(render(daemon.view(), kubelet, scenario.log, cdi_dir, stage.slices.devices()))
        else:
            if not live:
                print(render(daemon.view(), kubelet, scenario.log, cdi_dir, stage.slices.devices()))
                print("\nscenario done; the daemon keeps serving. Ctrl-C to stop.", flush=True)
            from hcs_deviceplugin.cli import SignalWaiter

            SignalWaiter(threading.Event()).wait()
        stop.set()
        daemon.stop()
        kubelet.stop()
        stage.kubelet.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return status


def _backends(
    args: argparse.Namespace, workdir: Path, stop: threading.Event
) -> tuple[dict[str, Backend], Callable[[Daemon], HealthInjector], dict[str, Path]]:
    """The simulated backend, or (``--hardware fake``) every vendor's real one on its fake; a usage
    error leaves no work directory behind."""
    if args.hardware == "fake":
        return _fake_hardware_backends(workdir / "hardware", stop)
    try:
        backends, injector_for = _simulated_backend(args.node, stop)
    except SystemExit:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return backends, injector_for, {}


def _dra_stage(workdir: Path, node: str) -> tuple[DraSetup, DraStage]:
    """The DRA front end's setup over in-memory claims and slices, and kubelet's DRA side (started)."""
    claims, slices = MemoryClaims(), MemorySlices()
    kubelet = DraKubeletSimulator(workdir / "plugins_registry").start()
    setup = DraSetup(
        DraConfig(DEFAULT_DRIVER, workdir / "state", workdir / "plugins", workdir / "plugins_registry"),
        claims,
        slices,
    )
    return setup, DraStage(kubelet, claims, slices, DEFAULT_DRIVER, node)


def _simulated_backend(
    node: Path | None, stop: threading.Event
) -> tuple[dict[str, Backend], Callable[[Daemon], HealthInjector]]:
    """The simulated backend on ``node`` (or its embedded default); it injects faults itself.

    A ``node`` that cannot be read or is not a node description is a usage error, one line and
    status 2 (the backend would call itself absent, and the simulation would have no hardware).
    """
    options = {"node": str(node)} if node else {}
    try:
        backend = load_factory(SIMULATED_BACKEND)(BackendConfig(options=options, stop=stop))
    except BackendAbsent as exc:
        print(f"hcs-deviceplugin: error: --node: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return {backend.name: backend}, lambda _: cast(HealthInjector, backend)


def _fake_hardware_backends(
    directory: Path, stop: threading.Event
) -> tuple[dict[str, Backend], Callable[[Daemon], HealthInjector], dict[str, Path]]:
    """Every vendor fake that can be set up here, with its real backend started on it, and the
    host root of each (where the CDI specs' device nodes are read)."""
    prepared = prepare_all(directory)
    if not prepared.ready:
        raise SystemExit(
            f"simulate --hardware fake: no fake hardware could be set up: {dict(prepared.skipped)}"
        )
    for name, reason in prepared.skipped.items():
        print(f"simulate: {name} fake hardware skipped: {reason}", file=sys.stderr)
    backends: dict[str, Backend] = {}
    for fake in prepared.ready:
        config = BackendConfig(host_root=fake.host_root, options=fake.options, stop=stop)
        backends[fake.backend] = load_factory(fake.backend)(config)
    by_backend = {fake.backend: fake for fake in prepared.ready}

    def injector_for(daemon: Daemon) -> HealthInjector:
        return HardwareInjector(by_backend, lambda: {c.id: c for c in daemon.view().cards})

    return backends, injector_for, {fake.backend: fake.host_root for fake in prepared.ready}


def _paint_live(
    daemon: Daemon,
    kubelet: KubeletSimulator,
    scenario: Scenario,
    stop: threading.Event,
    done: threading.Event,
) -> None:
    while not stop.is_set():
        with scenario.lock:
            lines = list(scenario.log)
        suffix = "\n\nscenario done; the daemon keeps serving. Ctrl-C to stop." if done.is_set() else ""
        dra = scenario.dra.slices.devices() if scenario.dra is not None else None
        text = render(daemon.view(), kubelet, lines, daemon.config.cdi_dir, dra)
        sys.stdout.write(CLEAR + text + suffix + "\n")
        sys.stdout.flush()
        stop.wait(0.5)
