"""The committed gRPC stubs and wire codecs are exactly what the documented command generates from proto/."""

from __future__ import annotations

import filecmp
from pathlib import Path

from hcs_deviceplugin.api import regenerate
from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.api.dra.v1 import api_pb2 as dra_v1
from hcs_deviceplugin.api.dra.v1beta1 import api_pb2 as dra_v1beta1
from hcs_deviceplugin.api.drahealth.v1 import api_pb2 as dra_health_v1
from hcs_deviceplugin.api.drahealth.v1alpha1 import api_pb2 as dra_health
from hcs_deviceplugin.api.pluginregistration.v1 import api_pb2 as reg
from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr


def test_committed_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    produced = regenerate.generate(tmp_path)
    assert len(produced) == len(regenerate.GENERATED_SUFFIXES) * len(regenerate.PROTO_FILES)
    committed_root = regenerate.repository_root()
    stale = []
    for fresh in produced:
        relative = fresh.relative_to(tmp_path)
        committed = committed_root / relative
        if not committed.exists() or not filecmp.cmp(fresh, committed, shallow=False):
            stale.append(str(relative))
    assert not stale, f"stale generated files, run python -m hcs_deviceplugin.api.regenerate: {stale}"


def test_wire_names_and_field_numbers_match_kubelet() -> None:
    assert dp.DESCRIPTOR.package == "v1beta1"
    assert pr.DESCRIPTOR.package == "v1"
    services = {s.full_name for s in dp.DESCRIPTOR.services_by_name.values()}
    assert services == {"v1beta1.Registration", "v1beta1.DevicePlugin"}
    fields = {f.name: f.number for f in dp.ContainerAllocateResponse.DESCRIPTOR.fields}
    assert fields == {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4, "cdi_devices": 5}
    pref = {f.name: f.number for f in dp.ContainerPreferredAllocationRequest.DESCRIPTOR.fields}
    assert pref == {"available_deviceIDs": 1, "must_include_deviceIDs": 2, "allocation_size": 3}
    assert {f.name: f.number for f in dp.Device.DESCRIPTOR.fields} == {"ID": 1, "health": 2, "topology": 3}
    dyn = {f.name: f.number for f in pr.DynamicResource.DESCRIPTOR.fields}
    assert dyn == {"claim_name": 2, "claim_namespace": 3, "claim_resources": 4}
    claim = pr.ClaimResource.DESCRIPTOR.fields_by_name["share_id"]
    assert claim.number == 5 and claim.has_presence


def test_device_plugin_messages_round_trip_on_the_wire() -> None:
    response = dp.ContainerAllocateResponse(
        envs={"A": "1"},
        devices=[dp.DeviceSpec(container_path="/dev/x", host_path="/dev/x", permissions="rw")],
        cdi_devices=[dp.CDIDevice(name="vendor.com/class=dev0")],
    )
    data = response.SerializeToString()
    # field 5 (cdi_devices), wire type 2 → tag byte 0x2a must be present.
    assert b"\x2a" in data
    assert dp.ContainerAllocateResponse.FromString(data) == response


def test_plugin_registration_wire_names_match_kubelet() -> None:
    # Upstream kept the package "pluginregistration" for v1: the method path kubelet dials.
    assert reg.DESCRIPTOR.package == "pluginregistration"
    service = reg.DESCRIPTOR.services_by_name["Registration"]
    assert [m.name for m in service.methods] == ["GetInfo", "NotifyRegistrationStatus"]
    info = {f.name: f.number for f in reg.PluginInfo.DESCRIPTOR.fields}
    assert info == {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4}
    status = {f.name: f.number for f in reg.RegistrationStatus.DESCRIPTOR.fields}
    assert status == {"plugin_registered": 1, "error": 2}


def test_dra_wire_names_and_field_numbers_match_kubelet() -> None:
    for module, version in ((dra_v1, "v1"), (dra_v1beta1, "v1beta1")):
        assert module.DESCRIPTOR.package == f"k8s.io.kubelet.pkg.apis.dra.{version}"
        service = module.DESCRIPTOR.services_by_name["DRAPlugin"]
        assert service.full_name == f"k8s.io.kubelet.pkg.apis.dra.{version}.DRAPlugin"
        assert [m.name for m in service.methods] == ["NodePrepareResources", "NodeUnprepareResources"]
        assert {f.name: f.number for f in module.Claim.DESCRIPTOR.fields} == {
            "namespace": 1,
            "uid": 2,
            "name": 3,
        }
        device = {f.name: f.number for f in module.Device.DESCRIPTOR.fields}
        assert device == {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4}
        prepared = {f.name: f.number for f in module.NodePrepareResourceResponse.DESCRIPTOR.fields}
        assert prepared == {"devices": 1, "error": 2}
        assert module.NodeUnprepareResourceResponse.DESCRIPTOR.fields_by_name["error"].number == 1
        assert (
            module.NodePrepareResourcesResponse.DESCRIPTOR.fields_by_name["claims"]
            .message_type.GetOptions()
            .map_entry
        )


def test_dra_v1_and_v1beta1_messages_are_byte_compatible() -> None:
    """kubelet may speak either version; the same bytes must mean the same claim in both."""
    request = dra_v1.NodePrepareResourcesRequest(claims=[dra_v1.Claim(namespace="ns", uid="u1", name="c")])
    again = dra_v1beta1.NodePrepareResourcesRequest.FromString(request.SerializeToString())
    assert (again.claims[0].namespace, again.claims[0].uid, again.claims[0].name) == ("ns", "u1", "c")


def test_dra_health_wire_names_and_field_numbers_match_kubelet() -> None:
    """k8s.io/kubelet/pkg/apis/dra-health/v1alpha1: package "v1alpha1", so the service kubelet dials
    and the name a plugin advertises is "v1alpha1.DRAResourceHealth"."""
    assert dra_health.DESCRIPTOR.package == "v1alpha1"
    service = dra_health.DESCRIPTOR.services_by_name["DRAResourceHealth"]
    assert service.full_name == "v1alpha1.DRAResourceHealth"
    [method] = service.methods
    assert method.name == "NodeWatchResources" and method.server_streaming and not method.client_streaming
    assert dict(dra_health.HealthStatus.items()) == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}
    ident = {f.name: f.number for f in dra_health.DeviceIdentifier.DESCRIPTOR.fields}
    assert ident == {"pool_name": 1, "device_name": 2}
    health = {f.name: (f.number, f.type) for f in dra_health.DeviceHealth.DESCRIPTOR.fields}
    # types: 11 message, 14 enum, 3 int64
    assert health == {"device": (1, 11), "health": (2, 14), "last_updated_time": (3, 3)}
    assert dra_health.NodeWatchResourcesResponse.DESCRIPTOR.fields_by_name["devices"].number == 1
    assert not dra_health.NodeWatchResourcesRequest.DESCRIPTOR.fields


def test_dra_health_v1_wire_names_and_field_numbers_match_kubelet() -> None:
    """k8s.io/kubelet/pkg/apis/dra-health/v1: package "v1", v1alpha1's fields 1-3 plus a timeout (4)
    and a message (5); v1alpha1 bytes read as v1 say the same."""
    assert dra_health_v1.DESCRIPTOR.package == "v1"
    service = dra_health_v1.DESCRIPTOR.services_by_name["DRAResourceHealth"]
    assert service.full_name == "v1.DRAResourceHealth"
    [method] = service.methods
    assert method.name == "NodeWatchResources" and method.server_streaming
    assert dict(dra_health_v1.HealthStatus.items()) == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}
    health = {f.name: (f.number, f.type) for f in dra_health_v1.DeviceHealth.DESCRIPTOR.fields}
    assert health == {
        "device": (1, 11),
        "health": (2, 14),
        "last_updated_time": (3, 3),
        "health_check_timeout_seconds": (4, 3),
        "message": (5, 9),
    }
    ident = {f.name: f.number for f in dra_health_v1.DeviceIdentifier.DESCRIPTOR.fields}
    assert ident == {"pool_name": 1, "device_name": 2}
    alpha = dra_health.NodeWatchResourcesResponse(
        devices=[
            dra_health.DeviceHealth(
                device=dra_health.DeviceIdentifier(pool_name="n", device_name="d"),
                health=dra_health.UNHEALTHY,
                last_updated_time=7,
            )
        ]
    )
    [again] = dra_health_v1.NodeWatchResourcesResponse.FromString(alpha.SerializeToString()).devices
    assert (again.device.device_name, again.health, again.last_updated_time) == (
        "d",
        dra_health_v1.UNHEALTHY,
        7,
    )
