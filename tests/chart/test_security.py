"""Least privilege: who runs, with what, and which vendor settings widen it."""

from __future__ import annotations

import itertools

import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from tests.chart.chart import (
    ALL_ON,
    KUBE_VERSION,
    VENDORS,
    container,
    daemonset,
    merge,
    pod_spec,
    render,
    vendor_values,
)


def test_default_container_is_unprivileged_root_with_no_capabilities() -> None:
    sc = container()["securityContext"]
    assert sc["privileged"] is False
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    # uid 0 as the owner of kubelet's root:root 0750 device-plugins directory, so runAsNonRoot is
    # explicitly false rather than left to the image.
    assert sc["runAsUser"] == 0
    assert sc["runAsNonRoot"] is False
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pod_seccomp_is_runtime_default_and_no_host_namespaces() -> None:
    spec = pod_spec(ALL_ON)
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for key in ("hostPID", "hostIPC", "hostNetwork"):
        assert not spec.get(key, False), key


def test_only_tmp_is_writable_besides_the_device_plugins_state_and_cdi_dirs() -> None:
    spec = pod_spec(ALL_ON)
    writable = {m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if not m.get("readOnly")}
    assert writable == {
        "/var/lib/kubelet/device-plugins",
        "/var/lib/hcs-deviceplugin",
        "/var/run/cdi",
        "/tmp",
    }
    tmp = next(v for v in spec["volumes"] if v["name"] == "tmp")
    assert tmp["emptyDir"]["medium"] == "Memory"


# Which vendors need a privileged container with their default settings (see values.yaml).
PRIVILEGED_BY_DEFAULT = {"nvidia": False, "ascend": True, "hygon": False, "cambricon": False}


@pytest.mark.parametrize("vendor", VENDORS)
def test_privileged_only_for_vendors_that_need_it(vendor: str) -> None:
    sc = container(vendor_values(vendor))["securityContext"]
    assert sc["privileged"] is PRIVILEGED_BY_DEFAULT[vendor]
    if PRIVILEGED_BY_DEFAULT[vendor]:
        # The API rejects allowPrivilegeEscalation: false together with privileged: true, and a
        # capability list would be meaningless: privileged has them all.
        assert "allowPrivilegeEscalation" not in sc
        assert "capabilities" not in sc
    else:
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True


def test_nvidia_privileged_switch() -> None:
    values = merge(vendor_values("nvidia"), {"vendors": {"nvidia": {"privileged": True}}})
    assert container(values)["securityContext"]["privileged"] is True


def test_ascend_can_run_unprivileged_when_asked() -> None:
    values = merge(vendor_values("ascend"), {"vendors": {"ascend": {"privileged": False}}})
    assert container(values)["securityContext"]["privileged"] is False


def test_a_disabled_vendor_does_not_widen_privileges() -> None:
    """Ascend is privileged by default, but only an ENABLED vendor counts."""
    values = merge(vendor_values("hygon"), {"vendors": {"ascend": {"privileged": True}}})
    assert container(values)["securityContext"]["privileged"] is False


def test_added_capabilities_are_explicit() -> None:
    values = {"securityContext": {"addCapabilities": ["SYS_RAWIO"]}}
    caps = container(values)["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["SYS_RAWIO"]}


def test_service_account_token_only_when_the_api_is_used() -> None:
    assert pod_spec()["automountServiceAccountToken"] is False
    assert pod_spec({"apiSource": {"inCluster": True}})["automountServiceAccountToken"] is True
    assert pod_spec({"nodeLabels": {"enabled": True}})["automountServiceAccountToken"] is True
    sa = next(o for o in render() if o["kind"] == "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False


def test_no_privilege_escalation_conflict_anywhere() -> None:
    """privileged: true never comes with allowPrivilegeEscalation: false (the API would reject it)."""
    for vendor in VENDORS:
        for privileged in (False, True):
            values = merge(vendor_values(vendor), {"vendors": {vendor: {"privileged": privileged}}})
            sc = container(values)["securityContext"]
            assert not (sc["privileged"] and sc.get("allowPrivilegeEscalation") is False)


def _subsets(size: int) -> list[tuple[str, ...]]:
    return list(itertools.combinations(VENDORS, size))


# Every vendor alone, every pair and every larger set, with every privileged setting of the enabled
# ones; disabled vendors ask for privileged, which must not count.
PRIVILEGE_CASES = [
    (enabled, tuple(name for name, wants in zip(enabled, flags, strict=True) if wants))
    for size in range(1, len(VENDORS) + 1)
    for enabled in _subsets(size)
    for flags in itertools.product((False, True), repeat=len(enabled))
]


def _case_id(case: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
    enabled, privileged = case
    return "+".join(f"{name}{'!' if name in privileged else ''}" for name in enabled)


@pytest.mark.parametrize("case", PRIVILEGE_CASES, ids=[_case_id(c) for c in PRIVILEGE_CASES])
def test_privileged_when_any_enabled_vendor_asks(case: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    """One privileged vendor is enough, however many others are enabled or privileged too.

    A helper that printed "true" once per privileged vendor rendered "truetrue" for two of them, and
    the container silently lost privileged; with one vendor enabled by default no test saw it.
    """
    enabled, privileged = case
    vendors = {
        name: {"enabled": name in enabled, "privileged": name in privileged or name not in enabled}
        for name in VENDORS
    }
    values = {"vendors": vendors}
    ds = daemonset(values)
    kubernetes_validate.validate(ds, KUBE_VERSION, strict=True)
    sc = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    if privileged:
        assert sc["privileged"] is True
        assert "allowPrivilegeEscalation" not in sc
        assert "capabilities" not in sc
    else:
        assert sc["privileged"] is False
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
