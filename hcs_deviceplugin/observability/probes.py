"""Liveness and readiness of the daemon, as ``/healthz`` and ``/readyz`` answer them.

The two answer different questions and so fail for different reasons:

* **Alive** — is the process still doing its job at all? Kubernetes restarts the pod when not, so it
  must fail only for what a restart fixes: the daemon's view not readable, its control loop not
  taking events for long (wedged), a thread of the daemon dead, or a pool server stopped while the
  daemon still lists it.
  A kubelet that is down, or a bad ConfigMap, is *not* a liveness failure: a restart cannot fix
  either, and restarting would only drop the pools that still work.
* **Ready** — is every pool that should be served actually served, and the pool config applied as
  written? Served means proven, not assumed: the pool's socket answers a real gRPC call now, and its
  last successful Register was made to the kubelet.sock that exists now (a kubelet restart since
  then means kubelet no longer knows the pool). This gates a DaemonSet rollout and tells an operator
  where to look; it never causes a restart.

Thread liveness needs the daemon's help: if it has a ``thread_liveness() -> Mapping[str, bool]``
method (thread name → alive; see the README for the hook) it is used, otherwise only the lock and
pool-server checks run, which the view alone supports.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.kubelet.watch import FileIdentity, file_identity
from hcs_deviceplugin.plugin.probe import pool_serving_problem, probe_pool, registration_problem
from hcs_deviceplugin.plugin.server import RegistrationStatus, ServerStatus

DEFAULT_TIMEOUT = 2.0
"""Seconds a view may take before we call the daemon stuck (views read published values: microseconds)."""


class Viewable(Protocol):
    """What the probes need from the daemon (``Daemon`` satisfies it)."""

    def view(self) -> DaemonView: ...


def one_line(text: str) -> str:
    """A reason on one line: probe bodies list one reason per line, and YAML errors span several."""
    return " ".join(text.split())


PROBE_TIMEOUT = 1.0
"""Seconds one pool's socket has to answer GetDevicePluginOptions during a readiness check."""


def readiness(
    view: DaemonView,
    kubelet_socket: Path | None = None,
    probe_timeout: float = PROBE_TIMEOUT,
) -> tuple[bool, list[str]]:
    """(ready, reasons): one reason per pool not proven served, one per config error in effect, and
    one when no backend runs at all (every enabled backend absent: nothing could ever be served).

    With ``kubelet_socket`` each registered pool is also probed over its socket and its registration
    checked against the current kubelet.sock; without it only the recorded status is used.
    """
    reasons: list[str] = []
    if view.waiting_for:
        reasons.append(f"daemon: {one_line(view.waiting_for)}")
    if not view.running_backends:
        reasons.append(no_backend_reason(view.absent_backends))
    current: FileIdentity | None = file_identity(kubelet_socket) if kubelet_socket is not None else None
    for name in view.wanted_pools:
        if name not in view.pools:
            reasons.append(f"pool {name}: not started yet")
    for name, pool_view in sorted(view.pools.items()):
        problem = _pool_problem(pool_view.server, kubelet_socket, current, probe_timeout)
        if problem:
            reasons.append(f"pool {name}: {one_line(problem)}")
    if view.awaiting:
        reasons.append(
            f"{len(view.awaiting)} card(s) held back until pod-resources answers: "
            f"{one_line(view.pod_resources_error) or 'no answer yet'}"
        )
    reasons += [f"config: {one_line(error)}" for error in view.config_errors]
    reasons += cdi_problems(view)
    if view.dra_problem:
        reasons.append(f"dra: {one_line(view.dra_problem)}")
    return not reasons, reasons


def cdi_problems(view: DaemonView) -> list[str]:
    """Pools whose Allocate names CDI devices that our specs may not define: the last spec write
    failed, or no spec is written at all. Without such a pool a failed write is only logged."""
    cdi_pools = sorted(n for n, p in view.pools.items() if p.pool.device_delivery.uses_cdi)
    if not cdi_pools:
        return []
    if not view.cdi_dir:
        return [
            f"pool {name}: deviceDelivery {view.pools[name].pool.device_delivery.value} needs CDI specs, "
            "but --cdi-dir is empty"
            for name in cdi_pools
        ]
    return [f"cdi: {one_line(view.cdi_error)} (pools {', '.join(cdi_pools)})"] if view.cdi_error else []


def no_backend_reason(absent: Mapping[str, str]) -> str:
    """Why a daemon with no backend serves nothing: each absent backend with its own reason.

    Absence is decided once, at start, so this holds until the daemon is restarted on a node (or
    with ``--vendors``) where a backend finds its hardware; a Ready daemon that can never serve a
    card would hide a wrong node selector or a missing driver from the rollout.
    """
    if not absent:
        return "backends: none enabled"
    found = "; ".join(f"{name} ({one_line(reason)})" for name, reason in sorted(absent.items()))
    return f"backends: none running, every enabled one is absent: {found}"


def _pool_problem(
    server: ServerStatus, kubelet_socket: Path | None, current: FileIdentity | None, timeout: float
) -> str | None:
    if kubelet_socket is None:
        return registration_problem(server)
    return pool_serving_problem(server, current) or probe_pool(Path(server.socket), timeout)


def view_problems(view: DaemonView) -> list[str]:
    """What a view alone says is broken beyond what a restart-free recovery handles."""
    return [
        f"pool {name}: server stopped while still served"
        for name, pool_view in sorted(view.pools.items())
        if pool_view.server.status is RegistrationStatus.STOPPED
    ]


def stalled(daemon: object) -> list[str]:
    """Why the daemon's control loop looks wedged, if it reports that (optional hook)."""
    check = getattr(daemon, "stalled", None)
    if not callable(check):
        return []
    reasons: list[str] = check()
    return reasons


def dead_threads(daemon: object) -> list[str]:
    """Names of the daemon's threads that have ended, if it reports them (optional hook)."""
    liveness = getattr(daemon, "thread_liveness", None)
    if not callable(liveness):
        return []
    threads: Mapping[str, bool] = liveness()
    return sorted(name for name, is_alive in threads.items() if not is_alive)


class LivenessProbe:
    """Checks the daemon answers within ``timeout`` and that its parts are running.

    The view is taken on a helper thread so a wedged lock costs the probe ``timeout`` seconds, not a
    hung HTTP thread per probe. While an earlier helper is still blocked the probe waits for it (up to
    ``timeout``) instead of starting another, so a stuck daemon leaks one thread per concurrent probe, not one
    per probe, and a daemon that recovers is seen alive again at the next probe.
    """

    def __init__(self, daemon: Viewable, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._daemon = daemon
        self._timeout = timeout
        self._lock = threading.Lock()
        self._pending: threading.Thread | None = None

    def check(self) -> tuple[bool, str]:
        """(alive, reason); the reason is ``ok`` when alive, else the problems joined by ``; ``."""
        views: list[DaemonView] = []
        errors: list[Exception] = []
        with self._lock:
            pending = self._pending
        if pending is not None and pending.is_alive():
            pending.join(self._timeout)
            if pending.is_alive():
                return False, "daemon state still not readable since an earlier probe (control loop stuck?)"
        with self._lock:
            helper = threading.Thread(
                target=self._take_view, args=(views, errors), name="hcs-liveness-probe", daemon=True
            )
            self._pending = helper
            helper.start()
        helper.join(self._timeout)
        if helper.is_alive():
            return False, f"daemon state not readable within {self._timeout:g}s (control loop stuck?)"
        if errors:
            return False, f"daemon view failed: {type(errors[0]).__name__}: {errors[0]}"
        problems = view_problems(views[0])
        dead = dead_threads(self._daemon)
        if dead:
            problems.append(f"daemon thread(s) not running: {', '.join(dead)}")
        problems += stalled(self._daemon)
        return not problems, "; ".join(problems) or "ok"

    def _take_view(self, views: list[DaemonView], errors: list[Exception]) -> None:
        try:
            views.append(self._daemon.view())
        except Exception as exc:
            errors.append(exc)


def alive(daemon: Viewable, timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, str]:
    """One liveness check (see :class:`LivenessProbe`; a server keeps one probe for all checks)."""
    return LivenessProbe(daemon, timeout).check()
