"""Hot-removal → Unhealthy at the kubelet, through the whole daemon, for any re-scanning backend.

The sysfs backends see a removal on their next re-scan, so each sample removes the card at a random
point of the re-scan cycle (a fixed rhythm would lock onto the scan and measure one phase only),
then waits for the first ListAndWatch list that shows the card not Healthy, then puts it back and
waits until the kubelet simulator sees every card Healthy again.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hcs_deviceplugin.backend import Backend
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.model import Card
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.simulation.configmap_volume import write_configmap_volume

WAIT = 10.0


def hot_removal_samples(
    root: Path,
    backend: Backend,
    stop: threading.Event,
    victim: Card,
    remove: Callable[[Card], None],
    restore: Callable[[Card], None],
    rescan_seconds: float,
    rounds: int,
    seed: int = 7,
) -> list[float]:
    """Seconds from removing ``victim`` to the kubelet simulator seeing it not Healthy, per round."""
    cards = backend.discover().cards
    pools = "version: v1\npools:\n  - name: removal\n    devices:\n" + "".join(
        f"      - uuid: {c.id}\n" for c in cards
    )
    write_configmap_volume(root / "pools", {"pools.yaml": pools})
    kubelet = KubeletSimulator(root / "dp")
    kubelet.start()
    daemon = Daemon(DaemonConfig(plugin_dir=root / "dp", node_name="bench"), {backend.name: backend})
    daemon.add_source(lambda cb: DirectoryPoolSource(root / "pools", cb))
    resource = "gpu.deckhouse.io/removal"
    seen = threading.Condition()
    arrivals: list[tuple[float, bool]] = []

    def listener(name: str, devices: list[Any], at: float) -> None:
        with seen:
            arrivals.append((at, any(victim.id == d.ID and d.health != "Healthy" for d in devices)))
            seen.notify_all()

    kubelet.add_snapshot_listener(listener)
    daemon.start()
    samples: list[float] = []
    phase = random.Random(seed)
    try:
        kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(cards), WAIT, "up")
        for _ in range(rounds):
            time.sleep(phase.uniform(0, rescan_seconds))
            with seen:
                arrivals.clear()
            start = time.monotonic()
            remove(victim)

            def down(s: float = start) -> bool:
                return any(t >= s and bad for t, bad in arrivals)

            with seen:
                if not seen.wait_for(down, WAIT):
                    raise TimeoutError("hot-removal never reached the kubelet simulator")
                samples.append(next(t for t, bad in arrivals if t >= start and bad) - start)
            restore(victim)
            kubelet.wait_for(lambda k: len(k.resource(resource).healthy) == len(cards), WAIT, "returned")
    finally:
        stop.set()
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root / "dp", ignore_errors=True)
        shutil.rmtree(root / "pools", ignore_errors=True)
    return samples
