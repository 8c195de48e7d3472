"""The pod-resources poller coalesces requests: at most ten reads a second whatever the Allocate rate."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from hcs_deviceplugin.kubelet.poller import PodResourcesPoller
from hcs_deviceplugin.kubeletsim import KubeletSimulator


@pytest.fixture
def kubelet() -> Iterator[KubeletSimulator]:
    root = Path(tempfile.mkdtemp(prefix="hcsp", dir="/tmp"))  # unix socket paths must stay short
    sim = KubeletSimulator(root / "dp", pod_resources_socket=root / "pr.sock")
    sim.start()
    yield sim
    sim.stop()
    shutil.rmtree(root, ignore_errors=True)


def test_pokes_are_coalesced_to_the_minimum_gap(kubelet: KubeletSimulator) -> None:
    listings: list[float] = []
    got = threading.Event()

    def on_listed(_held: Mapping[str, frozenset[str]], started: float) -> None:
        listings.append(started)
        got.set()

    socket = kubelet.pod_resources_socket
    assert socket is not None
    poller = PodResourcesPoller(socket, interval=60.0, on_listed=on_listed, min_gap=0.1)
    poller.start()
    try:
        assert got.wait(5)
        began = time.monotonic()
        while time.monotonic() - began < 0.5:
            poller.poke()  # thousands of Allocate answers asking for a read
            time.sleep(0.0005)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and poller.reads < 3:
            time.sleep(0.01)
        assert 3 <= poller.reads <= 8  # 1 initial + at most one per 0.1 s over ~0.5 s (+ slack)
        gaps = [b - a for a, b in itertools.pairwise(listings)]
        assert all(gap >= 0.099 for gap in gaps), gaps
    finally:
        poller.stop()


def test_an_unreachable_socket_is_reported_not_listed(tmp_path: Path) -> None:
    listed = threading.Event()
    poller = PodResourcesPoller(tmp_path / "none.sock", 60.0, lambda _h, _t: listed.set())
    poller.start()
    try:
        deadline = time.monotonic() + 5
        while not poller.last_error and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "does not exist" in poller.last_error and not listed.is_set()
    finally:
        poller.stop()


def test_a_poke_reads_only_after_the_poke_delay(kubelet: KubeletSimulator) -> None:
    """The Allocate that poked is answered before its read competes with it (and kubelet cannot
    show the allocation before it has our answer anyway)."""
    listings: list[float] = []
    listed = threading.Condition()

    def on_listed(_held: Mapping[str, frozenset[str]], started: float) -> None:
        with listed:
            listings.append(started)
            listed.notify_all()

    socket = kubelet.pod_resources_socket
    assert socket is not None
    poller = PodResourcesPoller(socket, interval=60.0, on_listed=on_listed, min_gap=0.0, poke_delay=0.2)
    poller.start()
    try:
        with listed:
            assert listed.wait_for(lambda: len(listings) == 1, 5)
        poked = time.monotonic()
        poller.poke()
        with listed:
            assert listed.wait_for(lambda: len(listings) == 2, 5)
        assert listings[1] - poked >= 0.2
    finally:
        poller.stop()
