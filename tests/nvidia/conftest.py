"""Harness for NVIDIA backend tests: the fake libnvidia-ml, node files, backends that always close.

Every test gets its own node file (the fake re-reads a node file whose path changed on nvmlInit),
and every backend it makes is closed afterwards, so pynvml's process-global library and refcount are
back to idle before the next test - which may load a differently built fake.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pynvml
import pytest

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.model import Health, HealthEvent
from vendors.nvidia import NvidiaBackend, create_backend
from vendors.nvidia.fake import NODE_ENV, Control, NodeFiles, build_fake_nvml, write_host_tree, write_node

NVLINK_SYMBOLS = (
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
)


@pytest.fixture(scope="session")
def fake_build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fake-nvml")


@pytest.fixture(scope="session")
def fake_lib(fake_build_dir: Path) -> Path:
    return build_fake_nvml(fake_build_dir)


@pytest.fixture(scope="session")
def fake_lib_without_nvlink(fake_build_dir: Path) -> Path:
    return build_fake_nvml(fake_build_dir, omit=NVLINK_SYMBOLS)


@dataclass
class FakeNode:
    """One node description on disk, its host tree and its control file."""

    files: NodeFiles
    host_root: Path
    control: Control


@dataclass
class Harness:
    """Writes fake nodes and creates backends on them; closes every backend at teardown."""

    tmp_path: Path
    monkeypatch: pytest.MonkeyPatch
    lib: Path
    backends: list[NvidiaBackend] = field(default_factory=list)
    stops: dict[int, threading.Event] = field(default_factory=dict)
    streams: list[HealthStream] = field(default_factory=list)
    _count: int = 0

    def node(self, description: Mapping[str, object], sysfs_numa: bool = False) -> FakeNode:
        self._count += 1
        directory = self.tmp_path / f"node{self._count}"
        files = write_node(description, directory)
        host_root = directory / "root"
        write_host_tree(host_root, description, sysfs_numa=sysfs_numa)
        self.monkeypatch.setenv(NODE_ENV, str(files.node))
        return FakeNode(files, host_root, Control(files.control))

    def backend(
        self,
        node: FakeNode,
        options: Mapping[str, str] | None = None,
        *,
        lib: Path | None = None,
        **extra: str,
    ) -> NvidiaBackend:
        """A backend on ``node`` with ``options`` and ``extra`` (the fake library unless ``lib``)."""
        stop = threading.Event()
        all_options = {"library": str(lib or self.lib), **(options or {}), **extra}
        config = BackendConfig(host_root=node.host_root, options=all_options, stop=stop)
        backend = create_backend(config)
        self.backends.append(backend)
        self.stops[id(backend)] = stop
        return backend

    def watch(self, backend: NvidiaBackend) -> HealthStream:
        """Start consuming the backend's health stream; it is stopped at teardown."""
        stream = HealthStream(backend, self.stops[id(backend)])
        self.streams.append(stream)
        return stream

    def close(self) -> None:
        for stream in self.streams:
            stream.close()
        for backend in self.backends:
            backend.close()


@pytest.fixture
def nvidia(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lib: Path) -> Iterator[Harness]:
    for name in ("HCS_NVML_LIB", "DP_DISABLE_HEALTHCHECKS", "DP_ENABLE_HEALTHCHECKS"):
        monkeypatch.delenv(name, raising=False)
    harness = Harness(tmp_path, monkeypatch, fake_lib)
    try:
        yield harness
    finally:
        harness.close()
    assert pynvml._nvmlLib_refcount == 0, "a test left NVML initialised"


class HealthStream:
    """Consumes ``backend.health_events()`` on a thread, as the core does; waits on conditions only."""

    def __init__(self, backend: NvidiaBackend, stop: threading.Event) -> None:
        self._stop = stop
        self._events: queue.Queue[HealthEvent] = queue.Queue()
        self.seen: list[HealthEvent] = []
        self._thread = threading.Thread(target=self._run, args=(backend,), daemon=True)
        self._thread.start()

    def _run(self, backend: NvidiaBackend) -> None:
        for event in backend.health_events():
            self._events.put(event)

    def next(self, timeout: float = 10.0) -> HealthEvent:
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no health event within {timeout}s; seen so far: {self.seen}") from None
        self.seen.append(event)
        return event

    def wait_for(self, device_id: str, health: Health, timeout: float = 10.0) -> HealthEvent:
        """The first event for ``device_id`` with ``health``; events before it stay in :attr:`seen`."""
        while True:
            event = self.next(timeout)
            if event.device_id == device_id and event.health == health:
                return event

    def pending(self) -> list[HealthEvent]:
        drained = []
        while not self._events.empty():
            drained.append(self._events.get_nowait())
        self.seen.extend(drained)
        return drained

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10.0)
        assert not self._thread.is_alive(), "health stream did not end after stop"
