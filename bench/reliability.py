"""The reliability scenarios of issue #15, parameterised by counts: CI runs them small, the bench large.

Each drives ``hcs-deviceplugin run`` as a black box (see blackbox.py), breaks something the way a
node breaks, and returns what it measured; the tests assert on it and the bench prints it. Every
scenario also replays the kubelet simulator's timeline, so "0 cards in two pools" means at no moment,
not only once things settled.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from bench.blackbox import CARDS, WAIT, DaemonProcess, Site, pools_yaml, resource, site, socket_of, wait_until
from bench.common import percentile
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as pb
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from hcs_deviceplugin.kubeletsim import AllocationError
from hcs_deviceplugin.kubeletsim.sockets import remove_sockets
from hcs_deviceplugin.kubeletsim.timeline import (
    HELD_ELSEWHERE,
    Kind,
    TimelineEvent,
    Violation,
    describe,
    strip_replica,
)
from tests.pools.hostile import SPECIAL_KINDS, hostile_documents, make_special_file, special_applies

Action = Callable[[], None]

# -- (a) kubelet restarts ---------------------------------------------------------------------------


@dataclass
class RestartResult:
    restarts: int
    gap: float
    registrations: dict[str, int]
    allocations_before: int
    allocations_lost: int
    violations: list[Violation]
    recovery: list[float]
    restart_times: list[float]
    """How long the kubelet simulator's own restart took, each time (part of ``recovery``)."""

    @property
    def slow(self) -> str:
        return f" ({self.gap:g} s between socket cleanup and kubelet.sock)" if self.gap else ""

    def summary(self) -> str:
        return (
            f"kubelet restarted {self.restarts}x{self.slow}: registrations per pool {self.registrations} "
            f"(expected {self.restarts + 1} each), allocations lost {self.allocations_lost} of "
            f"{self.allocations_before}, timeline violations {len(self.violations)}, re-served median "
            f"{statistics.median(self.recovery) * 1000:.0f} ms max {max(self.recovery) * 1000:.0f} ms"
            + (
                f", simulated kubelet restart median {statistics.median(self.restart_times) * 1000:.1f} ms "
                f"p99 {percentile(self.restart_times, 99) * 1000:.1f} ms"
                if self.restart_times
                else ""
            )
        )


def kubelet_restarts(restarts: int, gap: float = 0.0) -> RestartResult:
    """Restart kubelet ``restarts`` times with pods allocated and streams open; each pool must register
    exactly once per restart, and every allocation survive with its devices still advertised.

    With ``gap`` the restart is slow, as a real kubelet's can be: its cleanup removes our sockets,
    and kubelet.sock comes back only ``gap`` seconds later. The daemon's once-a-second socket check
    then sees the removal first and rebuilds with no kubelet to register with; it must register
    once kubelet.sock is back.
    """
    pools = ("train", "shared")
    with site() as s:
        s.write_pools(pools_yaml({"train": CARDS[:2], "shared": CARDS[2:]}, {"shared": 4}))
        s.start_daemon(interval=5.0)  # the production defaults: 5 s pod-resources poll, 2 s settle
        wait_until(lambda: s.connected(*pools), WAIT, "pools registered")
        s.kubelet.allocate("trainer", "main", resource("train"), 1)
        s.kubelet.allocate("svc", "main", resource("shared"), 2)
        recovery: list[float] = []
        restart_times: list[float] = []
        for round_ in range(1, restarts + 1):
            if round_ % 2 == 0:  # allocations keep happening between restarts
                s.kubelet.allocate(f"pod-{round_}", "main", resource("shared"), 1)
                if round_ > 2:
                    s.kubelet.free_pod(f"pod-{round_ - 2}")
            before = sorted((a.key, a.device_ids) for a in s.kubelet.allocations())
            began = time.monotonic()
            if gap > 0:
                s.kubelet.stop()
                remove_sockets(s.plugin_dir)
                time.sleep(gap)  # the slow restart itself
                s.kubelet.start()
            else:
                s.kubelet.restart()
                restart_times.append(time.monotonic() - began)
            wanted = round_ + 1

            def back(wanted: int = wanted) -> bool:
                return all(s.registrations(p) >= wanted for p in pools) and s.connected(*pools)

            wait_until(back, WAIT, f"re-registered after restart {round_}")
            recovery.append(time.monotonic() - began)
            after = sorted((a.key, a.device_ids) for a in s.kubelet.allocations())
            assert after == before, f"allocations changed across restart {round_}"
        lost = 0
        allocations = s.kubelet.allocations()
        for record in allocations:
            pool = record.resource.rsplit("/", 1)[1]
            lost += not set(record.device_ids) <= s.advertised(pool)
        return RestartResult(
            restarts,
            gap,
            {p: s.registrations(p) for p in pools},
            len(allocations),
            lost,
            s.violations(),
            recovery,
            restart_times,
        )


# -- (b) allocation churn while pools.yaml is swapped ---------------------------------------------------


@dataclass
class ChurnResult:
    allocations: int
    swaps: int
    ok: int
    plugin_errors: Counter[str] = field(default_factory=Counter)
    kubelet_refusals: int = 0
    violations: list[Violation] = field(default_factory=list)
    moves: int = 0
    spare_moves: int = 0
    swap_every: float = 0.01

    def summary(self) -> str:
        return (
            f"{self.allocations} GetPreferredAllocation+Allocate from 4 threads, pools.yaml swapped "
            f"{self.swaps}x ({self.swap_every * 1000:.0f} ms apart), cards changed pool {self.moves}x "
            f"(allocated card) and {self.spare_moves}x (idle card): ok {self.ok}, plugin errors "
            f"{dict(self.plugin_errors) or 0}, kubelet found no free device {self.kubelet_refusals}x, "
            f"timeline violations {len(self.violations)}{longest(self.violations)}"
        )


def longest(violations: list[Violation]) -> str:
    """ ", the longest N ms" for a summary line, or nothing when there are none."""
    if not violations:
        return ""
    last = time.monotonic()
    return f" (the longest {max(v.duration(last) for v in violations) * 1000:.1f} ms)"


def pool_changes(events: list[TimelineEvent], card: str) -> int:
    """How many times ``card`` started being advertised by a resource other than its last one."""
    last = ""
    changes = 0
    for event in events:
        if event.kind is Kind.LIST and any(strip_replica(u) == card for u in event.ids):
            if last and event.resource != last:
                changes += 1
            last = event.resource
    return changes


def allocation_churn(allocations: int, threads: int = 4, swap_every: float = 0.01) -> ChurnResult:
    """Admit pods from ``threads`` threads while the pools file flips every ``swap_every`` seconds
    between two layouts that move cards between pools a and b."""
    # CARDS[1] moves between a and b, where pods come and go (it moves only when free); the fourth
    # card moves between c and d, which nobody allocates from, so it moves on nearly every swap.
    spare = "GPU-0041856c-3cfc-5227-850b-a3305930bce2"
    slices = {"a": 4, "b": 4, "c": 2}
    layouts = (
        pools_yaml({"a": CARDS[:2], "b": CARDS[2:], "c": [spare], "d": []}, slices),
        pools_yaml({"a": CARDS[:1], "b": CARDS[1:], "c": [], "d": [spare]}, slices),
    )
    result = ChurnResult(allocations, 0, 0, swap_every=swap_every)
    lock = threading.Lock()
    with site() as s:
        s.write_pools(layouts[0])
        s.start_daemon("--allocation-settle-seconds", "0.2", interval=0.05)
        wait_until(lambda: s.connected("a", "b"), WAIT, "pools registered")
        stop = threading.Event()

        def swapper() -> None:
            n = 0
            while not stop.wait(swap_every):
                n += 1
                s.write_pools(layouts[n % 2])
            result.swaps = n

        def worker(index: int, count: int) -> None:
            rng = random.Random(index)
            mine: list[str] = []
            for n in range(count):
                pod = f"w{index}-{n}"
                if mine:  # each thread's pod lives until its next admission
                    s.kubelet.free_pod(mine.pop())
                try:
                    s.kubelet.allocate(pod, "main", resource(rng.choice("ab")), 1)
                except AllocationError as exc:
                    with lock:
                        if exc.code is None:
                            result.kubelet_refusals += 1
                        else:
                            result.plugin_errors[exc.code.name] += 1
                else:
                    with lock:
                        result.ok += 1
                    if rng.random() < 0.7:
                        s.kubelet.free_pod(pod)  # most pods are short: cards get free to move
                    else:
                        mine.append(pod)

        swap = threading.Thread(target=swapper, daemon=True)
        swap.start()
        per = [allocations // threads + (i < allocations % threads) for i in range(threads)]
        with futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(worker, range(threads), per))
        stop.set()
        swap.join(5)
        result.violations = s.violations()
        timeline = s.kubelet.timeline()
        result.moves = pool_changes(timeline, CARDS[1])
        result.spare_moves = pool_changes(timeline, spare)
    return result


# -- (c) SIGKILL and restart with pod-resources slow or down ---------------------------------------------


@dataclass
class RestartSafetyResult:
    mode: str
    held_elsewhere_ms: float
    double_ms: float
    served_after_release: float

    def summary(self) -> str:
        return (
            f"SIGKILL + restart, pod-resources {self.mode}, held card moved in the config: held card "
            f"advertised by another pool {self.held_elsewhere_ms:.0f} ms, card in two pools "
            f"{self.double_ms:.0f} ms; after release it joined its new pool in "
            f"{self.served_after_release * 1000:.0f} ms"
        )


def sigkill_restart(mode: str, seconds: float) -> RestartSafetyResult:
    """``mode`` "slow": every List takes ``seconds``; "down": List fails UNAVAILABLE for ``seconds``;
    "gone": the pod-resources socket is removed for ``seconds``."""
    with site() as s:
        s.write_pools(pools_yaml({"a": CARDS[:1], "b": CARDS[1:2]}))
        first = s.start_daemon(interval=0.1)
        wait_until(lambda: s.connected("a", "b"), WAIT, "pools registered")
        s.kubelet.allocate("job", "main", resource("a"), 1)
        wait_until((s.root / "state" / "state.json").exists, WAIT, "state written")
        first.signal(signal.SIGKILL)
        first.wait(WAIT)
        s.write_pools(pools_yaml({"b": CARDS[:2]}))  # the held card moves while the daemon is gone
        if mode == "slow":
            s.kubelet.pod_resources_delay = seconds
        elif mode == "down":
            s.kubelet.pod_resources_down = True
        else:
            s.kubelet.remove_pod_resources_socket()
        s.start_daemon(interval=0.1)
        wait_until(lambda: s.connected("b"), WAIT, "b registered")
        if mode != "slow":
            time.sleep(seconds)  # the outage itself
            s.kubelet.pod_resources_down = False
            s.kubelet.restore_pod_resources_socket()
        else:
            wait_until(lambda: CARDS[1] in s.advertised("b"), WAIT + seconds, "b served after a slow read")
        s.kubelet.free_pod("job")
        took = wait_until(lambda: CARDS[0] in s.advertised("b"), WAIT + seconds * 2, "released card in b")
        violations = s.violations()
        last = time.monotonic()
        held = sum(v.duration(last) for v in violations if v.rule == HELD_ELSEWHERE)
        double = sum(v.duration(last) for v in violations if v.rule != HELD_ELSEWHERE)
        return RestartSafetyResult(mode, held * 1000, double * 1000, took)


# -- (d) faults: served again, and not ready meanwhile -----------------------------------------------------


@dataclass
class FaultResult:
    fault: str
    served_again: float
    ready_while_unserved: int
    samples: int

    def summary(self) -> str:
        return (
            f"{self.fault}: served again after {self.served_again * 1000:.0f} ms; /readyz 200 while not "
            f"served {self.ready_while_unserved} of {self.samples} samples"
        )


def _watch_readiness(
    s: Site, daemon: DaemonProcess, pool: str, until: Callable[[], bool], timeout: float = WAIT
) -> tuple[int, int]:
    """Sample (served, /readyz) until ``until()``; count samples ready while unserved before and after.

    TimeoutError after ``timeout`` seconds: a daemon that never recovers fails the scenario there,
    rather than hanging it (how fast it recovers is a figure the bench prints, not a threshold).
    """
    bad = samples = 0
    began = time.monotonic()
    while not until():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"timed out after {timeout}s waiting for pool {pool} to be served again")
        before = _served(s, pool)
        code, _ = daemon.readyz()
        after = _served(s, pool)
        samples += 1
        bad += code == 200 and not before and not after
    return bad, samples


def _served(s: Site, pool: str) -> bool:
    """Kubelet holds a live endpoint for the pool (registered, not stopped) and its socket answers."""
    path = s.plugin_dir / socket_of(pool)
    view = s.kubelet.resources().get(resource(pool))
    if not path.exists() or view is None or view.stopped_at is not None or not view.endpoint:
        return False
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            pb_grpc.DevicePluginStub(channel).GetDevicePluginOptions(pb.Empty(), timeout=1.0)
    except grpc.RpcError:
        return False
    return True


def faults(kubelet_down: float) -> list[FaultResult]:
    """Each fault on one running daemon, one after the other; the daemon must recover from each."""
    results = []
    with site() as s:
        s.write_pools(pools_yaml({"a": CARDS[:1]}))
        daemon = s.start_daemon(interval=0.1)
        wait_until(lambda: s.connected("a") and daemon.readyz()[0] == 200, WAIT, "ready")
        sock = s.plugin_dir / socket_of("a")

        outage: list[tuple[int, int]] = []
        """(ready while unserved, samples) taken during a fault that lasts a while."""

        def recover(
            name: str, breaking: Callable[[], None], restore: Callable[[], None] | None = None
        ) -> None:
            registrations = s.registrations("a")
            outage.clear()
            began = time.monotonic()
            breaking()
            if restore is not None:
                restore()

            def back() -> bool:
                return s.registrations("a") > registrations and _served(s, "a") and daemon.readyz()[0] == 200

            bad, samples = _watch_readiness(s, daemon, "a", back)
            bad += sum(b for b, _ in outage)
            samples += sum(n for _, n in outage)
            results.append(FaultResult(name, time.monotonic() - began, bad, samples))

        def file_at_socket() -> None:
            sock.unlink()
            sock.write_text("not a socket")

        recover("socket path occupied by a regular file", file_at_socket)
        recover("socket deleted", sock.unlink)

        def remove_plugin_dir() -> None:
            s.kubelet.stop()
            # The daemon may create its socket anew between emptying the dir and removing it (it
            # sees kubelet go): remove again until the dir is gone, as `rm -rf` run twice would.
            wait_until(lambda: _removed(s.plugin_dir), WAIT, "plugin dir removed")

        recover("plugin dir removed (kubelet re-creates it)", remove_plugin_dir, s.kubelet.start)

        def kubelet_gone() -> None:
            s.kubelet.stop()
            wait_until(lambda: daemon.readyz()[0] != 200, WAIT, "not ready without kubelet")
            end = time.monotonic() + kubelet_down  # the outage itself, sampled throughout
            outage.append(
                _watch_readiness(s, daemon, "a", lambda: time.monotonic() >= end, kubelet_down + WAIT)
            )

        recover(f"kubelet.sock gone {kubelet_down:g} s", kubelet_gone, s.kubelet.start)
        results.append(_second_instance(s, daemon))
    return results


def _removed(directory: Path) -> bool:
    """Remove ``directory`` and what is in it; whether it is gone (something created meanwhile keeps it)."""
    shutil.rmtree(directory, ignore_errors=True)
    return not directory.exists()


def _second_instance(s: Site, first: DaemonProcess) -> FaultResult:
    """A second daemon on the same plugin dir waits for the lock; it serves once the first exits."""
    registrations = s.registrations("a")
    second = s.start_daemon(interval=0.1)
    wait_until(lambda: "waiting for the lock" in second.readyz()[1], WAIT, "second instance waits")
    assert s.registrations("a") == registrations, "the waiting instance registered"
    assert _served(s, "a"), "the first instance kept serving"
    began = time.monotonic()
    first.signal(signal.SIGTERM)

    def back() -> bool:
        return s.registrations("a") > registrations and _served(s, "a") and second.readyz()[0] == 200

    bad, samples = _watch_readiness(s, second, "a", back)
    return FaultResult("second instance on the same plugin dir", time.monotonic() - began, bad, samples)


# -- (e) hostile pool files -------------------------------------------------------------------------------


@dataclass
class HostileResult:
    files: int
    refusal_times: list[float]
    peak_rss_kib: int
    crashes: int
    good_lost: int
    metric_errors: float

    def summary(self) -> str:
        times = self.refusal_times
        return (
            f"{self.files} hostile pool files: crashes {self.crashes}, last good lost {self.good_lost}, "
            f"refused median {statistics.median(times) * 1000:.1f} ms p90 {percentile(times, 90) * 1000:.1f} "
            f"ms p99 {percentile(times, 99) * 1000:.1f} ms max {max(times) * 1000:.1f} ms, "
            f"peak RSS {self.peak_rss_kib / 1024:.1f} MiB, "
            f"hcs_config_errors_total {self.metric_errors:.0f}"
        )


def hostile_files(limit: int | None) -> HostileResult:
    """Write each hostile document, then each special file, beside a good pools file, one at a time,
    and time each from its appearance to its error in /readyz; the good pool must stay served.

    ``limit`` takes about that many documents evenly spaced over the generator's list, so a short
    run still meets every kind (bombs, deep nesting, 10 MB, binary, many pools...), not the first few.
    """
    documents = list(hostile_documents())
    if limit is not None and limit < len(documents):
        documents = documents[:: -(-len(documents) // limit)]
    kinds = [k for k in SPECIAL_KINDS if special_applies(k)]
    with site() as s:
        s.pools_dir.mkdir(parents=True)
        (s.pools_dir / "good.yaml").write_text(pools_yaml({"a": CARDS[:1]}))
        daemon = s.start_daemon(interval=1.0)
        wait_until(lambda: s.connected("a") and daemon.readyz()[0] == 200, WAIT, "ready")
        times: list[float] = []
        lost = 0
        for n, (name, content) in enumerate(documents):
            path = s.pools_dir / f"hostile-{n:05d}-{name.replace('/', '_')}.yaml"
            tmp = s.pools_dir / f".tmp-{n}"
            tmp.write_bytes(content)
            tmp.rename(path)
            times.append(_refused(daemon, path))
            lost += CARDS[0] not in s.advertised("a")
            path.unlink()
            if not daemon.alive():
                break
        for n, kind in enumerate(kinds * 3):
            path = s.pools_dir / f"special-{n:03d}-{kind}.yaml"
            make_special_file(path, kind)
            times.append(_refused(daemon, path))
            lost += CARDS[0] not in s.advertised("a")
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        metric = sum(
            float(line.rsplit(" ", 1)[1])
            for line in daemon.metrics().splitlines()
            if line.startswith("hcs_config_errors_total{")
        )
        alive = daemon.alive()
        return HostileResult(
            len(times), times, daemon.status_field("VmHWM") if alive else 0, int(not alive), lost, metric
        )


def _refused(daemon: DaemonProcess, path: Path) -> float:
    """Seconds from now until /readyz names ``path`` (the file was just put in place)."""
    return wait_until(lambda: path.name in daemon.readyz()[1], WAIT, f"error for {path.name}", poll=0.001)


# -- (f) signals and memory ------------------------------------------------------------------------------


@dataclass
class SignalResult:
    sigterm_times: list[float]
    sigterm_hung_kubelet: list[float]
    bad_exits: int
    sighup_survived: bool

    def summary(self) -> str:
        def p99(xs: list[float]) -> float:
            return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]

        normal, hung = self.sigterm_times, self.sigterm_hung_kubelet
        return (
            f"SIGTERM to exit with sockets removed: median {statistics.median(normal) * 1000:.0f} ms "
            f"p99 {p99(normal) * 1000:.0f} ms (n={len(normal)}); with kubelet hung in "
            f"Register median {statistics.median(hung) * 1000:.0f} ms p99 "
            f"{p99(hung) * 1000:.0f} ms; non-zero exits {self.bad_exits}; SIGHUP "
            f"{'ignored, still serving' if self.sighup_survived else 'KILLED the daemon'}"
        )


class _HungRegistration(pb_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.release = threading.Event()

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.release.wait(60)
        return pb.Empty()


def _sigterm_once(s: Site, pools: tuple[str, ...]) -> tuple[float, int]:
    daemon = s.start_daemon(interval=0.1)
    socks = [s.plugin_dir / socket_of(p) for p in pools]
    wait_until(lambda: all(p.exists() for p in socks), WAIT, "sockets")
    exited: list[int] = []
    waiter = threading.Thread(target=lambda: exited.append(daemon.proc.wait()))  # blocking waitpid
    waiter.start()
    began = time.monotonic()
    daemon.signal(signal.SIGTERM)
    waiter.join(WAIT)
    took = time.monotonic() - began
    code = exited[0] if exited else -1
    assert not any(p.exists() for p in socks), "sockets left behind"
    return took, code


def signals(runs: int) -> SignalResult:
    pools = ("a", "b")
    bad = 0
    normal: list[float] = []
    hung: list[float] = []
    sighup = False
    with site() as s:
        s.write_pools(pools_yaml({"a": CARDS[:1], "b": CARDS[1:2]}))
        for _ in range(runs):
            took, code = _sigterm_once(s, pools)
            normal.append(took)
            bad += code != 0
        daemon = s.start_daemon(interval=0.1)
        wait_until(lambda: s.connected(*pools) and daemon.readyz()[0] == 200, WAIT, "ready")
        daemon.signal(signal.SIGHUP)
        wait_until(lambda: "SIGHUP ignored" in daemon.log(), WAIT, "SIGHUP logged")
        sighup = daemon.alive() and daemon.readyz()[0] == 200
        daemon.signal(signal.SIGTERM)
        bad += daemon.wait(WAIT) != 0
        s.kubelet.stop()
        hang = _HungRegistration()
        server = grpc.server(futures.ThreadPoolExecutor(8))
        pb_grpc.add_RegistrationServicer_to_server(hang, server)
        server.add_insecure_port(f"unix:{s.plugin_dir / 'kubelet.sock'}")
        server.start()
        try:
            for _ in range(runs):
                took, code = _sigterm_once(s, pools)
                hung.append(took)
                bad += code != 0
        finally:
            hang.release.set()
            server.stop(0)
            s.kubelet.start()
    return SignalResult(normal, hung, bad, sighup)


@dataclass
class SoakResult:
    seconds: float
    warm_rss_kib: int
    end_rss_kib: int

    def summary(self) -> str:
        growth = (self.end_rss_kib - self.warm_rss_kib) / self.warm_rss_kib * 100
        return (
            f"soak {self.seconds:.0f} s of restarts and allocation churn: RSS after warm-up "
            f"{self.warm_rss_kib / 1024:.1f} MiB, at the end {self.end_rss_kib / 1024:.1f} MiB "
            f"({growth:+.1f} %)"
        )


def soak(seconds: float, warmup: float) -> SoakResult:
    """Kubelet restarts, allocations and pools swaps for ``seconds``; RSS after ``warmup`` vs at the end."""
    layouts = (
        pools_yaml({"a": CARDS[:2], "b": CARDS[2:]}, {"a": 2, "b": 2}),
        pools_yaml({"a": CARDS[:1], "b": CARDS[1:]}, {"a": 2, "b": 2}),
    )
    with site() as s:
        s.write_pools(layouts[0])
        daemon = s.start_daemon(interval=0.1)
        wait_until(lambda: s.connected("a", "b"), WAIT, "ready")
        began = time.monotonic()
        warm = 0
        n = 0
        while time.monotonic() - began < seconds:
            n += 1
            s.write_pools(layouts[n % 2])
            with contextlib.suppress(AllocationError):
                s.kubelet.allocate(f"p{n}", "main", resource("ab"[n % 2]), 1)
            if n > 2:
                s.kubelet.free_pod(f"p{n - 2}")
            if n % 50 == 0:
                s.kubelet.restart()
                wait_until(lambda: s.connected("a", "b"), WAIT, "re-registered")
            if not warm and time.monotonic() - began >= warmup:
                warm = daemon.status_field("VmRSS")
        return SoakResult(time.monotonic() - began, warm, daemon.status_field("VmRSS"))


def check(violations: list[Violation]) -> str:
    """Violations formatted for an assertion message."""
    return describe(violations, time.monotonic())
