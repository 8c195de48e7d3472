"""CDI: what writing the specs costs the applier, and what CDI delivery costs Allocate.

* **spec rebuild and write** for a 64-card node with 4 partitions a card (320 entries): the
  inventory changed (a card came), so every entry is built, the host's device nodes are stat'ed and
  the file is replaced atomically (fsync included). The floor is the applier's usual call, an
  inventory that did not change (a health event, a hold): the object-identity check.
* **Allocate edits, cdi-cri vs deviceSpecs**: the daemon's in-memory ``edits_for`` for 8 units of
  one pool; the floor is the same pool with ``deviceSpecs``, so the ratio is what naming the spec
  adds on the gRPC thread.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.common import Result
from hcs_deviceplugin.cdi.publisher import CdiPublisher
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.model import DeviceDelivery, Inventory, Pool, Unit
from vendors.simulated import SimulatedBackend
from vendors.simulated.description import parse_node_description

CARDS = 64
PARTITIONS = 4


def node_description() -> dict[str, object]:
    cards = [
        {
            "id": f"GPU-{n:08x}-1111-2222-3333-{n:012x}",
            "vendor": "nvidia",
            "model": "H100",
            "index": n,
            "partitions": [{"id": f"MIG-{n:04x}-{p}", "profile": "1g.10gb"} for p in range(PARTITIONS)],
        }
        for n in range(CARDS)
    ]
    return {"cards": cards}


def timed(call: Callable[[], object], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def bench_publish(directory: Path, samples: int) -> Result:
    backend = SimulatedBackend(parse_node_description(node_description()))
    inventory = backend.discover()
    publisher = CdiPublisher(directory, {backend.name: backend}, lambda _: Path("/"))
    publisher.publish(inventory)
    floor = timed(lambda: publisher.publish(inventory), samples * 10)
    fewer = replace(inventory, cards=inventory.cards[1:])
    toggle = iter(range(10**9))

    def changed() -> None:
        publisher.publish(fewer if next(toggle) % 2 else inventory)

    return Result(
        f"cdi spec rebuild+write, {CARDS} cards x {PARTITIONS} parts", timed(changed, samples), min(floor)
    )


def bench_allocate_edits(directory: Path, samples: int) -> Result:
    backend = SimulatedBackend(parse_node_description(node_description()))
    inventory: Inventory = backend.discover()
    daemon = Daemon(
        DaemonConfig(plugin_dir=directory / "dp", node_name="bench", cdi_dir=directory / "cdi"),
        {backend.name: backend},
    )
    units = [Unit(c.id, c.id, backend.name) for c in inventory.cards[:8]]
    classic = Pool("p", "gpu.deckhouse.io/p")
    cdi = replace(classic, device_delivery=DeviceDelivery.CDI_CRI)
    floor = timed(lambda: daemon.edits_for(classic, units), samples)
    return Result(
        "Allocate edits for 8 units, cdi-cri vs deviceSpecs",
        timed(lambda: daemon.edits_for(cdi, units), samples),
        sorted(floor)[len(floor) // 2],
    )


def run(samples: int = 50) -> list[str]:
    """One line per measurement, as ``python -m bench --only cdi`` prints them."""
    directory = Path(tempfile.mkdtemp(prefix="hcs-cdi-bench-", dir="/tmp"))
    try:
        return [
            bench_publish(directory / "specs", samples).line(),
            bench_allocate_edits(directory, samples * 20).line(),
        ]
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    for line in run():
        print(line)
