"""Allocate and GetPreferredAllocation latency, measured around the gRPC handlers.

A server interceptor times the whole handler (unit lookup, ContainerEdits, response building, and a
rejection's abort) without the servicer knowing metrics exist, so ``plugin/`` stays free of them. The
PluginServer only has to pass it to ``grpc.server(interceptors=...)``; one instance serves one pool,
which is where the ``pool`` label comes from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from hcs_deviceplugin.observability.metrics import Metrics

SERVICE = "/v1beta1.DevicePlugin/"
ALLOCATE = SERVICE + "Allocate"
PREFERRED = SERVICE + "GetPreferredAllocation"

Observe = Callable[[float, bool], None]

if TYPE_CHECKING:  # grpc's classes are generic only in its stubs
    Handler = grpc.RpcMethodHandler[Any, Any]
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.ServerInterceptor


class LatencyInterceptor(_Interceptor):
    """Observes ``hcs_allocate_seconds`` and ``hcs_preferred_allocation_seconds`` for pool ``pool``."""

    def __init__(self, metrics: Metrics, pool: str) -> None:
        self._observers: dict[str, Observe] = {
            ALLOCATE: metrics.allocate_observer(pool),
            PREFERRED: metrics.preferred_observer(pool),
        }
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """The timed handler, built once per method: gRPC asks for it on every call."""
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        observe = self._observers.get(method)
        if handler is None or observe is None or handler.unary_unary is None:
            return handler
        kept = self._wrapped.get(method)
        if kept is not None and kept[0] is handler:
            return kept[1]
        wrapped = grpc.unary_unary_rpc_method_handler(
            _timed(handler.unary_unary, observe),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
        self._wrapped[method] = (handler, wrapped)
        return wrapped


def _timed(behaviour: Callable[[Any, grpc.ServicerContext], Any], observe: Observe) -> Callable[..., Any]:
    """``behaviour`` with its duration observed; ``ok`` is False when it raised (aborted)."""

    def timed(request: Any, context: grpc.ServicerContext) -> Any:
        started = time.perf_counter()
        ok = False
        try:
            response = behaviour(request, context)
            ok = True
            return response
        finally:
            observe(time.perf_counter() - started, ok)

    return timed
