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
from typing import Any

from hcs_deviceplugin import __version__
from hcs_deviceplugin.backend import BackendConfig, LoadedBackends, load_backends
from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.observability.http import ObservabilityServer
from hcs_deviceplugin.observability.interceptor import LatencyInterceptor
from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.observability.nodelabels import DEFAULT_GPU_TYPE_KEY, NodeLabeler
from hcs_deviceplugin.pools.aggregate import PoolAggregator
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from hcs_deviceplugin.pools.errors import ConfigError
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.objects import ConfigMapObject

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApiSettings:
    """Where to watch pool ConfigMaps through the Kubernetes API (optional)."""

    namespace: str
    label_selector: str
    in_cluster: bool = False
    kubeconfig: Path | None = None


@dataclass(frozen=True)
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
    backend_options: dict[str, dict[str, str]] = field(default_factory=dict)
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8080
    api: ApiSettings | None = None
    node_labels: bool = False
    gpu_type_label: str = DEFAULT_GPU_TYPE_KEY
    node_labels_interval: float = 30.0
    node_config_labels: dict[str, str] = field(default_factory=dict)
    """``--node-config-label``: labels the pool formats see, over the watched Node's."""
    watch_node: bool = False


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


def kubernetes_client(api: ApiSettings) -> Any:
    """An ApiClient from the in-cluster service account or a kubeconfig file."""
    import kubernetes

    if api.in_cluster:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
        return kubernetes.client.ApiClient()
    kubeconfig = str(api.kubeconfig) if api.kubeconfig else None
    return kubernetes.config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]


class Runner:
    """The running daemon and everything around it; ``start`` then ``stop``."""

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
        self.metrics = Metrics()
        observer = _HealthPoke(self.metrics)
        self.backends: LoadedBackends = load_backends(
            list(settings.vendors),
            lambda name: BackendConfig(
                host_root=settings.host_root,
                options=settings.backend_options.get(name, {}),
                stop=self.stop_event,
            ),
        )
        self.daemon = Daemon(
            DaemonConfig(
                plugin_dir=settings.plugin_dir,
                node_name=settings.node_name,
                pod_resources_socket=settings.pod_resources_socket,
                pod_resources_interval=settings.pod_resources_interval,
                allocation_settle_seconds=settings.allocation_settle_seconds,
                state_dir=settings.state_dir,
            ),
            self.backends.running,
            absent_backends=self.backends.absent,
            observer=observer,
            interceptors_for=lambda pool: [LatencyInterceptor(self.metrics, pool)],
        )
        self.aggregator = PoolAggregator(self._pools_changed, node=self._node_context(None))
        self._api_client: Any = None
        self._events: Any = None
        self.labeler: NodeLabeler | None = None
        # The same ConfigMap mounted and watched must be one object: give files the API namespace.
        namespace = settings.api.namespace if settings.api is not None else ""
        directory = DirectoryPoolSource(settings.pools_dir, aggregator=self.aggregator, namespace=namespace)
        self.daemon.add_source(lambda _on_change: directory)
        if settings.api is not None:
            self._add_api_source(settings.api)
        if settings.watch_node:
            self._add_node_watch()
        if settings.node_labels:
            self.labeler = NodeLabeler(
                self._api_client,
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
        )

    def _add_api_source(self, api: ApiSettings) -> None:
        from hcs_deviceplugin.pools.apisource import ApiConfigMapSource
        from hcs_deviceplugin.pools.events import EventRecorder

        self._api_client = kubernetes_client(api)

        def on_objects(objects: list[ConfigMapObject]) -> None:
            self.metrics.config_reload("api")
            self.aggregator.update("api", objects)

        source = ApiConfigMapSource(self._api_client, api.namespace, api.label_selector, on_objects)
        self._events = EventRecorder(
            self._api_client, api.namespace, node_name=self.settings.node_name, uid_lookup=source.uid_of
        )
        self.daemon.add_source(lambda _on_change: source)

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

        watch = NodeLabelWatch(self._api_client, self.settings.node_name, on_node)
        self.daemon.add_source(lambda _on_change: watch)

    def _pools_changed(self, poolset: PoolSet, errors: list[ConfigError]) -> None:
        """The aggregator's merged result: count errors, post Events, hand the pools to the daemon."""
        by_object = self.aggregator.errors_by_object()
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
        """Probes first (they say why nothing is served yet), then the daemon, then the labeler."""
        self._started = time.monotonic()
        self.http.start()
        self.daemon.start(cancel=self.stop_event)
        if self.stop_event.is_set():
            return
        if self.labeler is not None:
            self.labeler.start()  # after discovery, so its first round labels what the node has
        view = self.daemon.view()
        log.info(
            "hcs-deviceplugin %s started in %.0f ms: backends %s running, %s absent; pools %s; "
            "plugin dir %s; metrics on %s:%d",
            __version__,
            (time.monotonic() - self._started) * 1000,
            sorted(self.backends.running) or "none",
            sorted(self.backends.absent) or "none",
            sorted(view.pools) or "none",
            self.settings.plugin_dir,
            self.settings.metrics_address,
            self.http.port,
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
        log.info("hcs-deviceplugin stopped (%s) in %.0f ms", why, (time.monotonic() - began) * 1000)
