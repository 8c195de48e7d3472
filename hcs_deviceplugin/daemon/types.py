"""What the daemon is configured with and what it shows: config, observer hooks, published views."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.kubelet.podresources import DeviceAllocation
from hcs_deviceplugin.model import Card, Pool, PoolSet, Unit
from hcs_deviceplugin.plugin.server import Backoff, RegistrationStatus, ServerStatus
from hcs_deviceplugin.reconciler import HeldCard
from hcs_deviceplugin.rpc.calls import Interceptor


class PoolSource(Protocol):
    """Something that delivers PoolSets (mounted directory, API watch); started and stopped by us."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class DaemonObserver(Protocol):
    """Receives the events metrics count; keeps the daemon free of any metrics library."""

    def health_transition(self, card: str, to: str) -> None: ...

    def reregistration(self, pool: str) -> None: ...


InterceptorsFor = Callable[[str], Sequence[Interceptor]]
"""The interceptors for one pool's server, by pool name."""

PoolSourceFactory = Callable[[Callable[[PoolSet, Sequence[object]], None]], PoolSource]


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class DaemonConfig:
    """Where the daemon talks to kubelet, what node it is on, and its timings.

    ``state_dir`` None keeps the restart state in memory only (tests); the chart mounts a hostPath.
    ``lock_plugin_dir`` takes the one-daemon-per-directory flock at start.
    ``cdi_dir`` None writes no CDI specs (and a pool that asks for CDI delivery fails its Allocate);
    ``host_root`` is where the host's device nodes are read for the specs, per backend where
    ``backend_host_roots`` names one (``simulate --hardware fake`` gives each fake its own root).
    """

    plugin_dir: Path
    node_name: str
    kubelet_socket_name: str = "kubelet.sock"
    pod_resources_socket: Path | None = None
    pod_resources_interval: float = 5.0
    provisional_hold_seconds: float = 30.0
    allocation_settle_seconds: float = 2.0
    delivery_wait: float = 1.0
    backend_retry: Backoff = field(default_factory=lambda: Backoff(initial=0.5, maximum=30.0))
    registration_backoff: Backoff = field(default_factory=Backoff)
    state_dir: Path | None = None
    lock_plugin_dir: bool = True
    initial_discovery_wait: float = 10.0
    initial_pod_resources_wait: float = 1.0
    cdi_dir: Path | None = None
    host_root: Path = Path("/")
    backend_host_roots: Mapping[str, Path] = field(default_factory=lambda: MappingProxyType({}))

    def host_root_of(self, backend: str) -> Path:
        return self.backend_host_roots.get(backend, self.host_root)


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class PoolView:
    """One served pool as the report, the live view and tests see it."""

    pool: Pool
    units: tuple[Unit, ...]
    server: ServerStatus


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class DaemonView:
    """A consistent snapshot of the whole daemon, built from published immutable values."""

    cards: tuple[Card, ...]
    pools: Mapping[str, PoolView]
    conflicts: Mapping[str, tuple[str, ...]]
    draining: Mapping[str, tuple[str, str]]
    held: Mapping[str, HeldCard]
    layout_errors: tuple[str, ...]
    config_errors: tuple[str, ...]
    absent_backends: Mapping[str, str]
    failed_backends: Mapping[str, str]
    applied_changes: int
    awaiting: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    pod_resources_error: str = ""
    waiting_for: str = ""
    """Why the daemon serves nothing yet (the plugin-dir lock, the first discovery), or ""."""
    wanted_pools: tuple[str, ...] = ()
    """Device plugin pools the desired state says to serve; one missing from ``pools`` is not served
    yet (``api: dra`` pools are the DRA front end's: see ``dra_problem``)."""
    dra_problem: str = ""
    """Why the DRA front end does not serve its pools now (kubelet refused the registration, the
    ResourceSlices cannot be written), or ""."""
    cdi_dir: str = ""
    """Where the daemon writes its CDI specs; "" when it writes none."""
    cdi_error: str = ""
    """Why the last CDI spec write failed, or ""."""
    allocations: tuple[DeviceAllocation, ...] = ()
    """Who holds which of this node's units (namespace, pod, container), as pod-resources last listed
    them; just-allocated units appear once kubelet lists them."""
    draining_since: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """Draining card id → ``time.monotonic()`` when the daemon first saw it draining."""
    running_backends: tuple[str, ...] = ()
    """Backends created at start (failed ones too: they are retried); none means nothing can be served."""

    def all_registered(self) -> bool:
        return all(p.server.status is RegistrationStatus.REGISTERED for p in self.pools.values())
