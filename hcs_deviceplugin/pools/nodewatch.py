"""This node's labels from the API, kept current by a watch: the node half of the pool configuration.

The DKP NodeGroup format picks its config by a node label that DKP changes when a NodeGroup's sharing
mode changes; the Downward API cannot expose node labels to a pod, so the daemon reads its own Node.
This is the ConfigMap source's list + watch (:class:`~hcs_deviceplugin.pools.apisource.ApiConfigMapSource`,
with its resume, re-list on 410 and back-off) pointed at ``nodes`` with the field selector
``metadata.name=<node>``, handing the labels on as a :class:`NodeContext`.

A Node that disappears from the watch keeps its last labels: a deleted Node is a node going away, and
withdrawing its pools meanwhile would only churn kubelet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hcs_deviceplugin.kubeapi.client import KubeClient
from hcs_deviceplugin.pools.apisource import ApiConfigMapSource
from hcs_deviceplugin.pools.node import NodeContext
from hcs_deviceplugin.pools.objects import ConfigMapObject

log = logging.getLogger(__name__)


class NodeLabelWatch:
    """Watches Node ``node_name`` and calls ``on_node`` with its labels whenever they change."""

    def __init__(
        self,
        api_client: KubeClient,
        node_name: str,
        on_node: Callable[[NodeContext], object],
        **source_options: Any,
    ) -> None:
        self._node_name = node_name
        self._on_node = on_node
        self._last: NodeContext | None = None
        self._source = ApiConfigMapSource(
            api_client,
            "",
            "",
            self._on_objects,
            field_selector=f"metadata.name={node_name}",
            nodes=True,
            **source_options,
        )

    @property
    def current(self) -> NodeContext | None:
        """The labels last delivered (``None`` before the first list)."""
        return self._last

    @property
    def last_error(self) -> str:
        return self._source.last_error

    def start(self) -> None:
        self._source.start()

    def stop(self) -> None:
        self._source.stop()

    def wait_synced(self, timeout: float) -> bool:
        return self._source.wait_synced(timeout)

    def _on_objects(self, objects: list[ConfigMapObject]) -> None:
        mine = [o for o in objects if o.name == self._node_name]
        if not mine:
            if self._last is None:
                log.warning("Node %s not found through the API; its labels are not known", self._node_name)
            return
        context = NodeContext(self._node_name, dict(mine[0].labels), origin=f"Node {self._node_name}")
        if context == self._last:
            return
        self._last = context
        self._on_node(context)
