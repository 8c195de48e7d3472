"""The paths our DRA servers answer are the ones kubelet's generated stubs call.

grpcio's generated ``*_pb2_grpc.py`` files are the reference: each stub declares its methods on the
channel it is given, so a channel that records those declarations lists every path and whether it
is unary or a server stream. A typo in a service's package (``pluginregistration`` has no ``v1``,
the DRA services carry the Go import path) would leave kubelet with UNIMPLEMENTED.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from hcs_deviceplugin.api.dra.v1 import api_pb2_grpc as dra_v1_grpc
from hcs_deviceplugin.api.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from hcs_deviceplugin.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from hcs_deviceplugin.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from hcs_deviceplugin.dra.health import HealthFeed, HealthServicer
from hcs_deviceplugin.dra.preparer import ClaimRef, PrepareResult
from hcs_deviceplugin.dra.server import DRA_V1_SERVICE, DRA_V1BETA1_SERVICE, DraServicer, RegistrationServicer
from hcs_deviceplugin.rpc.calls import Method, ServerStream, Unary


class RecordingChannel:
    """Stands in for ``grpc.Channel``: what a generated stub declares, path → "unary" or "stream"."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def unary_unary(self, path: str, **_: Any) -> None:
        self.paths[path] = "unary"

    def unary_stream(self, path: str, **_: Any) -> None:
        self.paths[path] = "stream"


class NoClaims:
    def prepare(self, claim: ClaimRef) -> PrepareResult:
        raise AssertionError("not called")

    def unprepare(self, claim: ClaimRef) -> str:
        raise AssertionError("not called")


def declared(stub: Callable[[Any], object]) -> dict[str, str]:
    channel = RecordingChannel()
    stub(channel)
    return channel.paths


def served(methods: Mapping[str, Method]) -> dict[str, str]:
    kinds = {Unary: "unary", ServerStream: "stream"}
    return {path: kinds[type(method)] for path, method in methods.items()}


CASES: list[tuple[str, Callable[[Any], object], Callable[[], Mapping[str, Method]]]] = [
    (
        "registration",
        reg_grpc.RegistrationStub,
        lambda: RegistrationServicer("gpu.example.com", Path("/x"), lambda *_: None).methods(),
    ),
    ("dra v1", dra_v1_grpc.DRAPluginStub, lambda: DraServicer(NoClaims()).methods(DRA_V1_SERVICE)),
    (
        "dra v1beta1",
        dra_v1beta1_grpc.DRAPluginStub,
        lambda: DraServicer(NoClaims()).methods(DRA_V1BETA1_SERVICE),
    ),
    (
        "health v1 and v1alpha1",
        lambda channel: (
            health_v1_grpc.DRAResourceHealthStub(channel),
            health_v1alpha1_grpc.DRAResourceHealthStub(channel),
        ),
        lambda: HealthServicer(HealthFeed("n")).methods(),
    ),
]


@pytest.mark.parametrize(("name", "stub", "methods"), CASES, ids=[c[0] for c in CASES])
def test_we_serve_exactly_what_the_generated_stub_calls(
    name: str, stub: Callable[[Any], object], methods: Callable[[], Mapping[str, Method]]
) -> None:
    assert served(methods()) == declared(stub)
