"""Assembling the real daemon for ``hcs-deviceplugin run``: backends, pool sources, metrics, HTTP.

Kept apart from argument parsing so it reads as the wiring diagram of ARCHITECTURE.md: pool sources
feed one aggregator, the aggregator feeds the daemon, the daemon feeds the observability server and,
when node labels are on, the node labeler.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hcs_deviceplugin import __version__
from hcs_deviceplugin.backend import (
    BackendConfig,
    BackendOptionError,
    LoadedBackends,
    close_backend,
    load_backends,
)
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.observability.http import DEFER_LIMIT, ObservabilityServer, ReportAccess
from hcs_deviceplugin.observability.interceptor import LatencyInterceptor
from hcs_deviceplugin.observability.labelkeys import DEFAULT_GPU_TYPE_KEY
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.errors import ConfigError
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.objects import ConfigMapObject

if TYPE_CHECKING:
    from hcs_deviceplugin.dra.frontend import DraSetup
    from hcs_deviceplugin.kubeapi.client import KubeClient
    from hcs_deviceplugin.kubeapi.settings import ApiSettings
    from hcs_deviceplugin.observability.nodelabels import NodeLabeler

log = logging.getLogger(__name__)


class StartError(Exception):
    """The daemon cannot start as configured: the message is one line naming the setting at fault.

    Raised for what the operator must fix (a kubeconfig that cannot be loaded, a port in use, a
    misspelt backend option, a missing pools directory) before anything is served; ``run`` prints
    it and exits with status 2.
    """


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class RunSettings:
    """Everything ``run`` needs, parsed and validated by the CLI."""

    plugin_dir: Path
    pools_dir: Path
    host_root: Path
    vendors: tuple[str, ...]
    node_name: str
    pod_resources_socket: Path | None
    pod_resources_interval: float
    allocation_settle_seconds: float = 2.0
    state_dir: Path | None = None
    cdi_dir: Path | None = None
    backend_options: dict[str, dict[str, str]] = field(default_factory=dict)
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8080
    report_access: ReportAccess = "local"
    api: ApiSettings | None = None
    node_labels: bool = False
    gpu_type_label: str = DEFAULT_GPU_TYPE_KEY
    node_labels_interval: float = 30.0
    node_config_labels: dict[str, str] = field(default_factory=dict)
    """``--node-config-label``: labels the pool formats see, over the watched Node's."""
    watch_node: bool = False
    dra_driver: str = ""
    """``--dra-driver``: empty runs no DRA front end."""
    dra_plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    dra_registry_dir: Path = Path("/var/lib/kubelet/plugins_registry")


class _HealthPoke:
    """The daemon's observer: everything to metrics, and a health transition also wakes the labeler,
    so ``<vendor>.count`` follows a failing card at once rather than at the next interval."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.poke: Callable[[], None] = lambda: None

    def health_transition(self, card: str, to: str) -> None:
        self.metrics.health_transition(card, to)
        self.poke()

    def reregistration(self, pool: str) -> None:
        self.metrics.reregistration(pool)


def kubernetes_client(api: ApiSettings) -> KubeClient:
    """A client of the apiserver from the in-cluster service account or a kubeconfig file.

    :class:`StartError` when neither can be loaded: outside a pod there is no service account, and
    a kubeconfig is the operator's file, so anything its loader refuses is the operator's to fix.
    """
    from hcs_deviceplugin.kubeapi.client import KubeClient
    from hcs_deviceplugin.kubeapi.config import (
        KubeConfigError,
        default_kubeconfig,
        in_cluster_config,
        load_kubeconfig,
    )

    if api.in_cluster:
        try:
            return KubeClient(in_cluster_config())
        except KubeConfigError as exc:
            reason = _one_line(exc)
            raise StartError(
                f"--in-cluster: no service account to load ({reason}); outside a pod, give --kubeconfig"
            ) from None
    if api.kubeconfig is not None and not api.kubeconfig.is_file():
        problem = "not a file" if api.kubeconfig.exists() else "no such file"
        raise StartError(f"--kubeconfig {api.kubeconfig}: {problem}")
    kubeconfig = api.kubeconfig or default_kubeconfig()
    try:
        return KubeClient(load_kubeconfig(kubeconfig))
    except KubeConfigError as exc:
        raise StartError(f"--kubeconfig {kubeconfig}: cannot load it: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def read_pools_directory(settings: RunSettings) -> bool:
    """Whether to watch ``--pools-dir``; :class:`StartError` when it is needed and missing.

    A missing directory is never created: a mistyped path would otherwise be watched forever, empty,
    while the daemon serves nothing. The chart always mounts it (an empty ConfigMap volume is still
    a directory), so missing means mistyped, unless pools come through the API, which needs no
    mount: then the daemon goes on without it, and says so.
    """
    path = settings.pools_dir
    if path.is_dir():
        return True
    if path.exists():
        raise StartError(f"--pools-dir {path}: not a directory")
    if settings.api is None:
        raise StartError(
            f"--pools-dir {path}: no such directory (mount the pools ConfigMap there, "
            "or watch pool ConfigMaps through the API with --in-cluster or --kubeconfig)"
        )
    log.warning("pools directory %s does not exist: pools come from the Kubernetes API only", path)
    return False


class Runner:
    """The running daemon and everything around it; ``start`` then ``stop``.

    What the operator can get wrong is checked first and cheapest first (the pools directory, the
    Kubernetes client, backend options, then the metrics port in :meth:`start`), each as a
    :class:`StartError`, before anything is served.
    """

    def __init__(self, settings: RunSettings) -> None:
        if settings.watch_node and settings.api is None:
            raise ValueError("watching the Node needs the Kubernetes API: give --in-cluster or --kubeconfig")
        if settings.node_labels and settings.api is None:
            raise ValueError(
                "node labels need the Kubernetes API: give --in-cluster or --kubeconfig with --node-labels"
            )
        self.settings = settings
        self.stop_event = threading.Event()
        self._started = time.monotonic()
        watch_directory = read_pools_directory(settings)
        self._api_client = kubernetes_client(settings.api) if settings.api is not None else None
        self.metrics = Metrics(config_sources=("file", "api") if settings.api is not None else ("file",))
        observer = _HealthPoke(self.metrics)
        try:
            self.backends: LoadedBackends = load_backends(
                list(settings.vendors),
                lambda name: BackendConfig(
                    host_root=settings.host_root,
                    options=settings.backend_options.get(name, {}),
                    stop=self.stop_event,
                ),
            )
        except BackendOptionError as exc:
            raise StartError(f"--backend-option: {_one_line(exc)}") from None
        self.daemon = Daemon(
            DaemonConfig(
                plugin_dir=settings.plugin_dir,
                node_name=settings.node_name,
                pod_resources_socket=settings.pod_resources_socket,
                pod_resources_interval=settings.pod_resources_interval,
                allocation_settle_seconds=settings.allocation_settle_seconds,
                state_dir=settings.state_dir,
                cdi_dir=settings.cdi_dir,
                host_root=settings.host_root,
            ),
            self.backends.running,
            absent_backends=self.backends.absent,
            observer=observer,
            interceptors_for=lambda pool: [LatencyInterceptor(self.metrics, pool)],
            dra=self._dra_setup(),
        )
        self.aggregator = PoolAggregator(self._pools_changed, node=self._node_context(None))
        self._events: Any = None
        self.labeler: NodeLabeler | None = None
        if watch_directory:
            # The same ConfigMap mounted and watched must be one object: give files the API namespace.
            namespace = settings.api.namespace if settings.api is not None else ""
            directory = DirectoryPoolSource(
                settings.pools_dir,
                aggregator=self.aggregator,
                namespace=namespace,
                on_reload=lambda: self.metrics.config_reload("file"),
            )
            self.daemon.add_source(lambda _on_change: directory)
        if settings.api is not None:
            self._add_api_source(settings.api)
        if settings.watch_node:
            self._add_node_watch()
        if settings.node_labels:
            from hcs_deviceplugin.observability.nodelabels import NodeLabeler  # only with --node-labels

            self.labeler = NodeLabeler(
                self._api(),
                settings.node_name,
                self.daemon.view,
                interval=settings.node_labels_interval,
                gpu_type_key=settings.gpu_type_label,
            )
            observer.poke = self.labeler.poke
        self.http = ObservabilityServer(
            self.daemon,
            self.metrics,
            host=settings.metrics_address,
            port=settings.metrics_port,
            links=self.daemon.links,
            report_access=settings.report_access,
        )

    def _dra_setup(self) -> DraSetup | None:
        settings = self.settings
        if not settings.dra_driver:
            return None
        if self._api_client is None or settings.state_dir is None:
            raise StartError("--dra-driver needs the Kubernetes API and --state-dir")
        from hcs_deviceplugin.dra.claims import ApiClaimSource
        from hcs_deviceplugin.dra.frontend import DraConfig, DraSetup
        from hcs_deviceplugin.dra.slices import SliceApi

        return DraSetup(
            DraConfig(
                settings.dra_driver, settings.state_dir, settings.dra_plugins_dir, settings.dra_registry_dir
            ),
            ApiClaimSource(self._api_client),
            SliceApi(self._api_client),
        )

    def _add_api_source(self, api: ApiSettings) -> None:
        from hcs_deviceplugin.pools.apisource import ApiConfigMapSource
        from hcs_deviceplugin.pools.events import EventRecorder

        delivered = threading.Event()

        def on_objects(objects: list[ConfigMapObject]) -> None:
            if delivered.is_set():  # the first list is the load; every later delivery a reload
                self.metrics.config_reload("api")
            delivered.set()
            self.aggregator.update("api", objects)

        source = ApiConfigMapSource(self._api(), api.namespace, api.label_selector, on_objects)
        self._events = EventRecorder(
            self._api(), api.namespace, node_name=self.settings.node_name, uid_lookup=source.uid_of
        )
        self.daemon.add_source(lambda _on_change: source)

    def _api(self) -> KubeClient:
        """The client, for the parts that need ``settings.api`` (``__init__`` refuses them without)."""
        assert self._api_client is not None, "settings.api is None"
        return self._api_client

    def _node_context(self, watched: NodeContext | None) -> NodeContext:
        """The watched Node's labels (if any) with ``--node-config-label`` over them."""
        static = self.settings.node_config_labels
        if watched is None or watched.labels is None:
            labels = dict(static) if static else None
            return NodeContext(self.settings.node_name, labels, origin="--node-config-label")
        origin = watched.origin + (" and --node-config-label" if static else "")
        return NodeContext(self.settings.node_name, {**watched.labels, **static}, origin=origin)

    def _add_node_watch(self) -> None:
        from hcs_deviceplugin.pools.nodewatch import NodeLabelWatch

        def on_node(node: NodeContext) -> None:
            self.aggregator.set_node(self._node_context(node))

        watch = NodeLabelWatch(self._api(), self.settings.node_name, on_node)
        self.daemon.add_source(lambda _on_change: watch)

    def _pools_changed(self, poolset: PoolSet, errors: list[ConfigError]) -> None:
        """The aggregator's merged result: count errors, post Events, hand the pools to the daemon."""
        by_object = self.aggregator.errors_by_object()
        self.metrics.config_objects_seen(self.aggregator.known_objects())
        self.metrics.config_errors_changed(by_object)
        if self._events is not None:
            for (source, label), found in by_object.items():
                if source != "api" or "/" not in label:
                    continue
                namespace, name = label.split("/", 1)
                for error in found:
                    self._events.config_error(ConfigMapObject(name=name, namespace=namespace), str(error))
        self.daemon.set_pools(poolset, errors)

    def start(self) -> None:
        """Probes first (they say why nothing is served yet), then the daemon, then the labeler.

        The probes' port is bound first, but their server is built only once the daemon has
        applied its first pools and they have registered with kubelet and stream to it (or
        :data:`~hcs_deviceplugin.observability.http.DEFER_LIMIT` has passed, on a long start):
        registering does not wait for waitress's imports.

        :class:`StartError` when the metrics address cannot be bound (the port is in use, the
        address is not this host's); the backends are closed and nothing else was started.
        """
        self._started = time.monotonic()
        try:
            # Bound now; waitress is loaded once the pools stream to kubelet (or DEFER_LIMIT passed).
            self.http.start(defer=DEFER_LIMIT, ready=self.daemon.wait_streaming)
        except OSError as exc:
            for name, backend in self.backends.running.items():
                close_backend(name, backend)
            where = f"{self.settings.metrics_address}:{self.settings.metrics_port}"
            raise StartError(
                f"--metrics-address/--metrics-port {where}: cannot listen: {exc.strerror or _one_line(exc)}"
            ) from None
        try:
            self.daemon.start(cancel=self.stop_event)
        finally:
            self.http.serve_now()
        if self.stop_event.is_set():
            return
        if self.labeler is not None:
            self.labeler.start()  # after discovery, so its first round labels what the node has
        view = self.daemon.view()
        started_ms = round((time.monotonic() - self._started) * 1000)
        running, absent, pools = (
            sorted(self.backends.running),
            sorted(self.backends.absent),
            sorted(view.pools),
        )
        log.info(
            "hcs-deviceplugin %s started in %d ms: backends %s running, %s absent; pools %s; "
            "plugin dir %s; metrics on %s:%d",
            __version__,
            started_ms,
            running or "none",
            absent or "none",
            pools or "none",
            self.settings.plugin_dir,
            self.settings.metrics_address,
            self.http.port,
            extra={
                "event": "start",
                "version": __version__,
                "vendors": running,
                "absent_vendors": absent,
                "pools": pools,
                "plugin_dir": str(self.settings.plugin_dir),
                "metrics_address": self.settings.metrics_address,
                "metrics_port": self.http.port,
                "report_access": self.settings.report_access,
                "duration_ms": started_ms,
            },
        )

    def stop(self, why: str = "stop requested") -> None:
        """Sockets first (the daemon), then everything else; one line says how long it took."""
        began = time.monotonic()
        self.stop_event.set()
        http = threading.Thread(target=self.http.stop, name="http-stop", daemon=True)
        http.start()  # its serve loop takes up to one poll interval to notice: overlap that wait
        self.daemon.stop()
        if self.labeler is not None:
            self.labeler.stop(2.0)  # labels stay on the Node: see observability/nodelabels.py
        http.join(5.0)
        if self._events is not None:
            self._events.close(2.0)
        took_ms = round((time.monotonic() - began) * 1000)
        log.info(
            "hcs-deviceplugin stopped (%s) in %d ms",
            why,
            took_ms,
            extra={"event": "stop", "version": __version__, "reason": why, "duration_ms": took_ms},
        )
