"""Spec files for the simulated node and for every vendor's fake hardware, through the real backends.

Each fake builds its host tree (a C library with the real ABI, or sysfs and /dev) the way
``simulate --hardware fake`` does; the real backend discovers it; the publisher writes the specs;
the runtime model in :mod:`tests.cdi.runtime` loads them as containerd would.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.backend import Backend, BackendConfig, load_factory
from hcs_deviceplugin.cdi.names import unit_names
from hcs_deviceplugin.cdi.publisher import CdiPublisher, hardware_units
from hcs_deviceplugin.model import Health, Inventory
from hcs_deviceplugin.simulation.hardware import FakeHardware, prepare_all
from tests.cdi.runtime import CdiRegistry, ContainerState
from vendors.simulated import create_backend as create_simulated

CLASSES = {"nvidia": "gpu", "ascend": "npu", "hygon": "dcu", "cambricon": "mlu"}


@dataclass
class Fakes:
    hardware: dict[str, FakeHardware]
    backends: dict[str, Backend]
    inventories: dict[str, Inventory]


@pytest.fixture(scope="module")
def fakes() -> Iterator[Fakes]:
    directory = Path(tempfile.mkdtemp(prefix="hcs-cdi-", dir="/tmp"))
    environment = dict(os.environ)
    try:
        prepared = prepare_all(directory)
        assert not prepared.skipped, prepared.skipped
        hardware = {f.backend: f for f in prepared.ready}
        backends = {
            name: load_factory(name)(BackendConfig(host_root=f.host_root, options=f.options))
            for name, f in hardware.items()
        }
        yield Fakes(hardware, backends, {name: b.discover() for name, b in backends.items()})
    finally:
        for backend in backends.values():
            close = getattr(backend, "close", None)
            if callable(close):
                close()
        os.environ.clear()
        os.environ.update(environment)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("vendor", sorted(CLASSES))
def test_each_vendor_fake_gets_a_valid_spec_whose_nodes_exist_on_its_host(
    fakes: Fakes, vendor: str, tmp_path: Path
) -> None:
    backend, inventory = fakes.backends[vendor], fakes.inventories[vendor]
    host_root = fakes.hardware[vendor].host_root
    publisher = CdiPublisher(tmp_path, {vendor: backend}, lambda _: host_root)
    assert publisher.publish(inventory)
    assert [p.name for p in tmp_path.iterdir()] == [f"hcs-deviceplugin-{vendor}.json"]
    registry = CdiRegistry.load(tmp_path)
    (spec,) = registry.specs.values()
    assert spec["kind"] == f"hcs.deckhouse.io/{CLASSES[vendor]}"
    units = hardware_units(inventory)
    assert len(spec["devices"]) == len(units) == len(inventory.cards) + len(inventory.partitions) > 0
    names = unit_names(units, publisher.kinds)
    assert set(names) == set(registry.devices) == publisher.names
    for unit in units:
        (name,) = unit_names([unit], publisher.kinds)
        state = registry.resolve([name])
        assert state.device_nodes, f"{name} gives no device node"
        for node in state.device_nodes.values():
            assert (host_root / node["hostPath"].lstrip("/")).exists(), f"{name}: {node} not on the host"
        # What a classic Allocate answer for the same unit hands over, the spec hands over too.
        classic = backend.container_edits([unit], None)
        assert {(d.container_path, d.host_path) for d in classic.devices} <= {
            (n["path"], n["hostPath"]) for n in state.device_nodes.values()
        }
        assert {m.container_path for m in classic.mounts} <= set(state.mounts)


def test_real_device_nodes_get_their_numbers(fakes: Fakes, tmp_path: Path) -> None:
    """The fakes' /dev holds regular files; a real character device under the host root is read."""
    host = tmp_path / "host"
    shutil.copytree(fakes.hardware["hygon"].host_root, host, symlinks=True)
    kfd = host / "dev" / "kfd"
    kfd.unlink()
    kfd.symlink_to("/dev/null")  # a real char device the test can make without privileges
    backend = load_factory("hygon")(BackendConfig(host_root=host, options=fakes.hardware["hygon"].options))
    publisher = CdiPublisher(tmp_path / "cdi", {"hygon": backend}, lambda _: host)
    publisher.publish(backend.discover())
    registry = CdiRegistry.load(tmp_path / "cdi")
    st = os.stat("/dev/null")
    for _, device in registry.devices.values():
        nodes = {n["path"]: n for n in device["containerEdits"]["deviceNodes"]}
        assert (nodes["/dev/kfd"]["type"], nodes["/dev/kfd"]["major"], nodes["/dev/kfd"]["minor"]) == (
            "c",
            os.major(st.st_rdev),
            os.minor(st.st_rdev),
        )
        assert nodes["/dev/kfd"]["hostPath"] == "/dev/kfd", "the host path, not the host-root path"
        assert "major" not in nodes["/dev/mkfd"]


def test_simulated_node_spec(tmp_path: Path) -> None:
    backend = create_simulated(BackendConfig(options={"node": "builtin:default"}))
    inventory = backend.discover()
    publisher = CdiPublisher(tmp_path, {"simulated": backend}, lambda _: Path("/"))
    assert publisher.publish(inventory)
    registry = CdiRegistry.load(tmp_path)
    assert len(registry.devices) == len(inventory.cards) + len(inventory.partitions)
    assert all(name.startswith("hcs.deckhouse.io/simulated=") for name in registry.devices)


def test_a_card_gone_from_the_inventory_leaves_the_spec_and_health_changes_nothing(
    fakes: Fakes, tmp_path: Path
) -> None:
    backend, inventory = fakes.backends["cambricon"], fakes.inventories["cambricon"]
    publisher = CdiPublisher(
        tmp_path, {"cambricon": backend}, lambda _: fakes.hardware["cambricon"].host_root
    )
    publisher.publish(inventory)
    path = tmp_path / "hcs-deviceplugin-cambricon.json"
    written = path.stat().st_mtime_ns, path.read_bytes()
    sick = replace(inventory, cards=tuple(replace(c, health=Health.UNHEALTHY) for c in inventory.cards))
    publisher.publish(sick)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == written, "health is not part of a spec"
    gone = inventory.cards[0]
    publisher.publish(replace(inventory, cards=inventory.cards[1:]))
    registry = CdiRegistry.load(tmp_path)
    assert f"hcs.deckhouse.io/mlu={gone.id}" not in registry.devices
    assert len(registry.devices) == len(inventory.cards) - 1


def test_a_backend_not_heard_from_keeps_its_file_and_one_not_running_loses_it(
    fakes: Fakes, tmp_path: Path
) -> None:
    both = {name: fakes.backends[name] for name in ("hygon", "cambricon")}
    roots = {name: fakes.hardware[name].host_root for name in both}
    first = CdiPublisher(tmp_path, both, roots.__getitem__)
    first.publish(fakes.inventories["hygon"].merged(fakes.inventories["cambricon"]))
    restarted = CdiPublisher(tmp_path, both, roots.__getitem__)
    restarted.publish(fakes.inventories["hygon"], discovered=["hygon"])
    assert {p.name for p in tmp_path.iterdir()} == {
        "hcs-deviceplugin-hygon.json",
        "hcs-deviceplugin-cambricon.json",
    }, "cambricon has not answered yet: pods allocated before the restart still resolve"
    without = CdiPublisher(tmp_path, {"hygon": both["hygon"]}, roots.__getitem__)
    without.publish(fakes.inventories["hygon"])
    assert {p.name for p in tmp_path.iterdir()} == {"hcs-deviceplugin-hygon.json"}


def test_a_backend_that_cannot_describe_a_card_loses_only_that_entry(fakes: Fakes, tmp_path: Path) -> None:
    inventory = fakes.inventories["cambricon"]
    stranger = replace(inventory.cards[0], id="MLU-unknown", pci_address="0000:ff:00.0")
    publisher = CdiPublisher(
        tmp_path, {"cambricon": fakes.backends["cambricon"]}, lambda _: fakes.hardware["cambricon"].host_root
    )
    assert publisher.publish(replace(inventory, cards=(*inventory.cards, stranger)))
    assert len(CdiRegistry.load(tmp_path).devices) == len(inventory.cards)


def test_a_rediscovery_follows_the_host_even_when_the_cards_look_the_same(
    fakes: Fakes, tmp_path: Path
) -> None:
    """What a backend knows of the host (here: Hygon's node-wide /dev/mkfd) is not in the card values,
    so a rediscovery rebuilds the spec rather than comparing cards."""
    host = tmp_path / "host"
    shutil.copytree(fakes.hardware["hygon"].host_root, host, symlinks=True)
    backend = load_factory("hygon")(BackendConfig(host_root=host, options=fakes.hardware["hygon"].options))
    publisher = CdiPublisher(tmp_path / "cdi", {"hygon": backend}, lambda _: host)
    before = backend.discover()
    publisher.publish(before)
    assert all("/dev/mkfd" in s.device_nodes for s in _states(tmp_path / "cdi"))
    (host / "dev" / "mkfd").unlink()
    after = backend.discover()
    assert [c.id for c in after.cards] == [c.id for c in before.cards]
    publisher.publish(after)
    assert not any("/dev/mkfd" in s.device_nodes for s in _states(tmp_path / "cdi"))


def _states(directory: Path) -> list[ContainerState]:
    registry = CdiRegistry.load(directory)
    return [registry.resolve([name]) for name in registry.devices]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sets(st.integers(0, 11)), min_size=1, max_size=5))
def test_after_any_sequence_of_inventories_the_spec_is_exactly_the_last(subsets: list[set[int]]) -> None:
    """Cards come and go in any order: the files always hold exactly the current cards and partitions."""
    backend = create_simulated(BackendConfig(options={"node": "builtin:default"}))
    full = backend.discover()
    with tempfile.TemporaryDirectory() as directory:
        publisher = CdiPublisher(Path(directory), {"simulated": backend}, lambda _: Path("/"))
        for subset in subsets:
            cards = tuple(c for i, c in enumerate(full.cards) if i in subset)
            ids = {c.id for c in cards}
            inventory = replace(
                full, cards=cards, partitions=tuple(p for p in full.partitions if p.card_id in ids)
            )
            assert publisher.publish(inventory)
            expected = set(unit_names(hardware_units(inventory), publisher.kinds))
            found = set(CdiRegistry.load(Path(directory)).devices) if expected else set()
            assert found == expected
            assert list(Path(directory).iterdir()) == (
                [Path(directory) / "hcs-deviceplugin-simulated.json"] if expected else []
            )
