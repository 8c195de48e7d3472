"""Register over the real kubelet.sock: kubelet's refusals, the synchronous dial, newest-wins."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from tests.kubeletsim.conftest import RESOURCE, PluginFactory, SimFactory, registered
from tests.kubeletsim.fakeplugin import devices


def _refusal(exc_info: pytest.ExceptionInfo[grpc.RpcError]) -> tuple[grpc.StatusCode, str]:
    error = exc_info.value
    assert isinstance(error, grpc.Call)
    return error.code(), error.details() or ""


def test_unsupported_version_is_refused_with_unknown(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = make_plugin()
    with pytest.raises(grpc.RpcError) as refused:
        plugin.register(sim.kubelet_socket, RESOURCE, version="v1alpha")

    assert _refusal(refused) == (
        grpc.StatusCode.UNKNOWN,
        'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]',
    )
    [record] = sim.registrations
    assert (record.accepted, record.version, record.resource_name) == (False, "v1alpha", RESOURCE)
    assert sim.resources() == {}
    assert plugin.streams_opened == 0


def test_invalid_resource_name_is_refused(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = make_plugin()
    with pytest.raises(grpc.RpcError) as refused:
        plugin.register(sim.kubelet_socket, "kubernetes.io/gpu")

    assert _refusal(refused) == (grpc.StatusCode.UNKNOWN, 'the ResourceName "kubernetes.io/gpu" is invalid')
    assert sim.registrations[-1].error == 'the ResourceName "kubernetes.io/gpu" is invalid'
    assert sim.resources() == {}


def test_unreachable_endpoint_fails_the_dial(sim_factory: SimFactory, make_plugin: PluginFactory) -> None:
    sim = sim_factory(dial_timeout=0.3)
    plugin = make_plugin()
    with pytest.raises(grpc.RpcError) as refused:
        plugin.register(sim.kubelet_socket, RESOURCE, endpoint="nobody-listens.sock")

    code, details = _refusal(refused)
    assert code == grpc.StatusCode.UNKNOWN
    assert details == "failed to dial device plugin: context deadline exceeded"
    assert not sim.registrations[-1].accepted
    assert RESOURCE not in sim.resources()


def test_options_error_fails_registration(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = make_plugin()
    plugin.options_error = (grpc.StatusCode.FAILED_PRECONDITION, "not ready")
    with pytest.raises(grpc.RpcError) as refused:
        plugin.register(sim.kubelet_socket, RESOURCE, request_options=dp.DevicePluginOptions())

    code, details = _refusal(refused)
    assert code == grpc.StatusCode.UNKNOWN
    assert (
        details
        == "failed to get device plugin options: rpc error: code = FAILED_PRECONDITION desc = not ready"
    )
    assert RESOURCE not in sim.resources()
    assert plugin.streams_opened == 0


def test_successful_registration_uses_get_device_plugin_options(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    served = dp.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)
    plugin = make_plugin("opts.sock", options=served, initial=devices("d0", "d1"))
    plugin.register(sim.kubelet_socket, RESOURCE, request_options=dp.DevicePluginOptions())
    sim.wait_for(lambda s: s.resource(RESOURCE).snapshots == 1, what="first snapshot")

    [record] = sim.registrations
    assert record.accepted and record.error == ""
    assert (record.version, record.endpoint) == ("v1beta1", "opts.sock")
    assert not record.pre_start_required and not record.get_preferred_allocation_available
    view = sim.resource(RESOURCE)
    assert view.options == served  # kubelet ignores RegisterRequest.options and asks the plugin
    assert view.connected and view.stopped_at is None
    assert view.endpoint == str(plugin.socket_path)
    assert (view.registrations, view.stream_opens) == (1, 1)
    assert view.healthy == {"d0", "d1"}
    assert plugin.streams_opened == 1


def test_newest_registration_wins_and_old_stream_end_is_harmless(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    old = make_plugin("old.sock", initial=devices("a0"))
    new = make_plugin("new.sock", initial=devices("b0", "b1"))
    registered(sim, old)
    registered(sim, new)
    assert sim.resource(RESOURCE).healthy == {"b0", "b1"}
    assert sim.resource(RESOURCE).endpoint == str(new.socket_path)
    assert old.open_streams == 1  # kubelet does not close the replaced client

    old.end_streams()
    sim.wait_for(lambda s: s.resource(RESOURCE).stream_ends == 1, what="old stream end")
    view = sim.resource(RESOURCE)
    assert view.connected and view.stopped_at is None
    assert view.healthy == {"b0", "b1"} and view.unhealthy == set()

    new.end_streams()
    sim.wait_for(lambda s: not s.resource(RESOURCE).connected, what="new stream end")
    assert sim.resource(RESOURCE).unhealthy == {"b0", "b1"}


def test_same_socket_reregistration_replaces_the_endpoint(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = make_plugin(initial=devices("d0"))
    registered(sim, plugin)
    plugin.rebind()  # the old stream dies with the old server, the new one registers again
    sim.wait_for(lambda s: s.resource(RESOURCE).stream_ends == 1, what="old stream end")
    registered(sim, plugin)

    view = sim.resource(RESOURCE)
    assert view.connected and view.healthy == {"d0"}
    assert (view.registrations, view.stream_opens, view.stream_ends) == (2, 2, 1)


def test_stop_does_not_hang_on_a_registration_in_flight(
    sim_factory: SimFactory, make_plugin: PluginFactory
) -> None:
    sim = sim_factory(dial_timeout=30.0)
    plugin = make_plugin()
    plugin.options_gate = threading.Event()
    failures: list[grpc.RpcError] = []

    def register() -> None:
        try:
            plugin.register(sim.kubelet_socket, RESOURCE)
        except grpc.RpcError as exc:
            failures.append(exc)

    caller = threading.Thread(target=register)
    caller.start()
    try:
        plugin.wait_options_calls(1)
        started = time.monotonic()
        sim.stop()
        assert time.monotonic() - started < 1.0
        caller.join(5.0)
        assert not caller.is_alive() and len(failures) == 1
        assert sim.resources() == {}
    finally:
        plugin.options_gate.set()
        caller.join(5.0)


def test_socket_path_too_long_is_reported(sock_dir: Path) -> None:
    deep = sock_dir / ("d" * 100)
    sim = KubeletSimulator(deep)
    with pytest.raises(ValueError, match="longer than 107 bytes"):
        sim.start()
    assert not sim.running
