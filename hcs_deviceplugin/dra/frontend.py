"""The DRA front end as the daemon sees it: one object to start, feed and stop.

The daemon hands it the desired ``api: dra`` pools after every recompute (:meth:`DraFrontEnd.apply`);
it recomputes the devices, gives them to the preparer and the slice publisher, and reports the cards
prepared for claims back as holds (:meth:`DraFrontEnd.holds`), which the daemon merges with
pod-resources' listing so the no-double-booking rule covers both front ends alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.dra.checkpoint import ClaimCheckpoint
from hcs_deviceplugin.dra.claims import ClaimSource
from hcs_deviceplugin.dra.devices import DraDevice, slice_devices
from hcs_deviceplugin.dra.health import HealthFeed
from hcs_deviceplugin.dra.preparer import ClaimPreparer, EnsureCdi
from hcs_deviceplugin.dra.server import DraPluginServer
from hcs_deviceplugin.dra.slices import SlicePublisher, SliceStore
from hcs_deviceplugin.model import Health, Inventory
from hcs_deviceplugin.reconciler import DesiredPool

DEFAULT_DRIVER = "gpu.deckhouse.io"
DEFAULT_PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
DEFAULT_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")


@dataclass(frozen=True)
class DraConfig:
    driver: str
    checkpoint_dir: Path
    plugins_dir: Path = DEFAULT_PLUGINS_DIR
    registry_dir: Path = DEFAULT_REGISTRY_DIR


@dataclass(frozen=True)
class DraSetup:
    """What the daemon needs from outside to run the front end: where, and the API behind it
    (``slices`` None: no ResourceSlices are published, e.g. a run without API access)."""

    config: DraConfig
    claims: ClaimSource
    slices: SliceStore | None = None


class DraFrontEnd:
    def __init__(
        self,
        setup: DraSetup,
        node: str,
        kinds: Mapping[str, str],
        ensure_cdi: EnsureCdi,
        on_holds_changed: Callable[[], None],
    ) -> None:
        config = setup.config
        self.driver = config.driver
        self._kinds = dict(kinds)
        self.preparer = ClaimPreparer(
            config.driver,
            node,
            setup.claims,
            ClaimCheckpoint(config.checkpoint_dir),
            ensure_cdi,
            on_holds_changed,
        )
        self.health = HealthFeed(node)
        self.server = DraPluginServer(
            config.driver, config.plugins_dir, config.registry_dir, self.preparer, self.health
        )
        self.slices = SlicePublisher(setup.slices, config.driver, node) if setup.slices is not None else None
        self.devices: tuple[DraDevice, ...] = ()
        self._had_pools = False

    def start(self) -> None:
        self.server.start()
        if self.slices is not None:
            self.slices.start()

    def stop(self) -> None:
        """Sockets go; slices stay (a restarting daemon must not make the scheduler forget devices)."""
        self.server.stop()
        if self.slices is not None:
            self.slices.stop()

    def apply(
        self, pools: Mapping[str, DesiredPool], inventory: Inventory, health: Mapping[str, Health]
    ) -> None:
        devices = slice_devices(pools, inventory, health, self._kinds)
        self.preparer.set_devices(devices)
        self.health.publish(devices)
        changed = devices != self.devices
        self.devices = devices
        if self.slices is None:
            return
        if pools:
            if changed or not self._had_pools:
                self.slices.update(devices)
        elif self._had_pools:
            self.slices.withdraw()
        self._had_pools = bool(pools)

    def problem(self) -> str:
        """ "" while the front end serves; else why not (for readiness and the report)."""
        if self.server.registered is False:
            return f"kubelet refused the DRA registration: {self.server.registration_error}"
        if self.slices is not None and self.slices.last_error:
            return self.slices.last_error
        return ""

    def holds(self) -> dict[str, frozenset[str]]:
        return self.preparer.holds()
