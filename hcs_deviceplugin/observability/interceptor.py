"""Allocate and GetPreferredAllocation latency, measured around the gRPC handlers.

An interceptor times the whole handler (unit lookup, ContainerEdits, response building, and a
rejection's abort) without the servicer knowing metrics exist, so ``plugin/`` stays free of them. The
PluginServer passes it to its RPC server, which asks it once per method for the handler to serve;
one instance serves one pool, which is where the ``pool`` label comes from.
"""

from __future__ import annotations

import time
from typing import Any

from hcs_deviceplugin.observability.metrics import Metrics
from hcs_deviceplugin.rpc.calls import CallContext, Message, UnaryHandler

SERVICE = "/v1beta1.DevicePlugin/"
ALLOCATE = SERVICE + "Allocate"
PREFERRED = SERVICE + "GetPreferredAllocation"


class LatencyInterceptor:
    """Observes ``hcs_allocate_seconds`` and ``hcs_preferred_allocation_seconds`` for pool ``pool``."""

    def __init__(self, metrics: Metrics, pool: str) -> None:
        self._metrics = metrics
        self._pool = pool

    def __call__(self, method: str, handler: UnaryHandler) -> UnaryHandler:
        """The timed handler for Allocate and GetPreferredAllocation; others as they are."""
        if method == ALLOCATE:
            observe = self._metrics.allocate_observer(self._pool)
        elif method == PREFERRED:
            observe = self._metrics.preferred_observer(self._pool)
        else:
            return handler

        def timed(request: Any, context: CallContext) -> Message:
            started = time.perf_counter()
            ok = False
            try:
                response = handler(request, context)
                ok = True
                return response
            finally:
                observe(time.perf_counter() - started, ok)

        return timed
