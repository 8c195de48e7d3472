"""Registration as kubelets of each DRA generation judge it: 1.34+ picks ``v1.DRAPlugin``, 1.32 /
1.33 know only ``v1beta1.DRAPlugin``; an entry a kubelet does not know (the health service) is
ignored, not refused. A 1.33-style kubelet prepares and unprepares a claim end to end over v1beta1."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.api.pluginregistration.v1 import api_pb2 as reg
from hcs_deviceplugin.dra.health import HEALTH_SERVICES
from hcs_deviceplugin.dra.server import PLUGIN_TYPE, SUPPORTED_SERVICES
from hcs_deviceplugin.kubeletsim.dra import (
    KNOWN_SERVICES,
    KNOWN_SERVICES_1_32,
    DraKubeletSimulator,
    check_info,
    choose_service,
)
from tests.dra.rig import DRIVER, dra_rig

TIMEOUT = 10.0
OURS = (*SUPPORTED_SERVICES, *HEALTH_SERVICES)


@pytest.mark.parametrize(
    ("listed", "known", "chosen"),
    [
        (OURS, KNOWN_SERVICES, "v1.DRAPlugin"),
        (OURS, KNOWN_SERVICES_1_32, "v1beta1.DRAPlugin"),
        (("v1beta1.DRAPlugin",), KNOWN_SERVICES, "v1beta1.DRAPlugin"),
        (("v1.DRAPlugin",), KNOWN_SERVICES_1_32, ""),
        (HEALTH_SERVICES, KNOWN_SERVICES, ""),
        (("1.0.0",), KNOWN_SERVICES, ""),  # the 1.31 era's version strings are not service names
    ],
)
def test_the_service_each_kubelet_chooses(
    listed: tuple[str, ...], known: tuple[str, ...], chosen: str
) -> None:
    assert choose_service(listed, known) == chosen
    info = reg.PluginInfo(type=PLUGIN_TYPE, name=DRIVER, endpoint="", supported_versions=list(listed))
    _, problem = check_info(info, known)
    assert ("none of the versions" in problem) == (not chosen)


def test_our_list_names_every_service_a_1_32_to_1_37_kubelet_prepares_with() -> None:
    assert set(KNOWN_SERVICES) | set(KNOWN_SERVICES_1_32) <= set(SUPPORTED_SERVICES)


def test_a_1_33_kubelet_prepares_and_unprepares_over_v1beta1() -> None:
    with dra_rig() as rig:
        rig.kubelet.stop()
        with DraKubeletSimulator(rig.root / "plugins_registry", known_services=KNOWN_SERVICES_1_32) as old:
            rig.kubelet = old
            rig.start_plugin()
            registration = old.wait_registered(DRIVER, TIMEOUT)
            assert registration.service == "v1beta1.DRAPlugin"
            device = rig.devices[0]
            ref = rig.put_claim("old-kubelet", [device.name])
            answer = old.prepare(DRIVER, [ref]).claims[ref[1]]
            assert answer.error == "" and [d.device_name for d in answer.devices] == [device.name]
            assert rig.preparer is not None and rig.preparer.holds()
            assert old.unprepare(DRIVER, [ref]).claims[ref[1]].error == ""
            assert rig.preparer.holds() == {}
            rig.stop_plugin()
