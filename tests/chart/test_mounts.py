"""Host mounts: kubelet's directories, /sys and /dev read-only, and each vendor's driver paths."""

from __future__ import annotations

import pytest

from tests.chart.chart import (
    ALL_ON,
    CASES,
    VENDORS,
    args,
    container,
    flag,
    host_mounts,
    pod_spec,
    vendor_values,
)

# What each vendor mounts from the host (read-only, at /host<path>), per values.yaml.
VENDOR_PATHS = {
    "nvidia": {"/proc/driver", "/usr/lib", "/usr/lib64"},
    "ascend": {"/usr/local/Ascend/driver", "/usr/local/dcmi"},
    "hygon": {"/opt/hyhal", "/opt/dtk"},
    "cambricon": {"/proc/driver", "/usr/bin"},
}
KUBELET_DIRS = {"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/sys", "/dev"}
STATE_DIR = "/var/lib/hcs-deviceplugin"
CDI_DIR = "/var/run/cdi"
COMMON = KUBELET_DIRS | {STATE_DIR, CDI_DIR}


@pytest.mark.parametrize("case", CASES)
def test_kubelet_directories(case: str) -> None:
    mounts = host_mounts(CASES[case])
    assert mounts["/var/lib/kubelet/device-plugins"] == ("/var/lib/kubelet/device-plugins", False)
    # The pod-resources directory, read-only (connecting to a socket needs no write access to the
    # mount); never the socket file itself, whose inode changes when kubelet restarts.
    assert mounts["/var/lib/kubelet/pod-resources"] == ("/var/lib/kubelet/pod-resources", True)
    assert not any(path.endswith(".sock") for path in mounts)


@pytest.mark.parametrize("case", CASES)
def test_kubelet_hostpaths_must_exist(case: str) -> None:
    volumes = {
        v["hostPath"]["path"]: v["hostPath"].get("type")
        for v in pod_spec(CASES[case])["volumes"]
        if "hostPath" in v
    }
    for path in KUBELET_DIRS:
        assert volumes[path] == "Directory", path
    # Our own restart state: created on first start, read-write, and handed to --state-dir.
    assert volumes[STATE_DIR] == "DirectoryOrCreate"
    assert host_mounts(CASES[case])[STATE_DIR] == (STATE_DIR, False)
    assert flag(args(CASES[case]), "state-dir") == STATE_DIR


@pytest.mark.parametrize("case", CASES)
def test_sys_and_dev_are_read_only_under_host_root(case: str) -> None:
    mounts = host_mounts(CASES[case])
    assert mounts["/sys"] == ("/host/sys", True)
    assert mounts["/dev"] == ("/host/dev", True)


@pytest.mark.parametrize("vendor", VENDORS)
def test_vendor_paths_follow_enabled(vendor: str) -> None:
    mounts = host_mounts(vendor_values(vendor))
    assert set(mounts) == COMMON | VENDOR_PATHS[vendor]
    for path in VENDOR_PATHS[vendor]:
        assert mounts[path] == (f"/host{path}", True), path


def test_all_vendors_mount_every_path_once() -> None:
    spec = pod_spec(ALL_ON)
    mounts = host_mounts(ALL_ON)
    assert set(mounts) == COMMON.union(*VENDOR_PATHS.values())
    names = [v["name"] for v in spec["volumes"]]
    assert len(names) == len(set(names))
    mount_paths = [m["mountPath"] for m in spec["containers"][0]["volumeMounts"]]
    assert len(mount_paths) == len(set(mount_paths))
    assert {m["name"] for m in spec["containers"][0]["volumeMounts"]} <= set(names)


def test_vendor_folders_do_not_stop_the_pod_on_nodes_without_them() -> None:
    """A vendor folder may be missing on a node of another vendor: DirectoryOrCreate, never Directory."""
    volumes = {
        v["hostPath"]["path"]: v["hostPath"]["type"] for v in pod_spec(ALL_ON)["volumes"] if "hostPath" in v
    }
    for path in ("/usr/local/Ascend/driver", "/usr/local/dcmi", "/opt/hyhal", "/opt/dtk", "/usr/lib64"):
        assert volumes[path] == "DirectoryOrCreate", path


def test_host_root_flag_matches_the_mounts() -> None:
    values = {**ALL_ON, "hostRoot": "/hostfs"}
    assert flag(args(values), "host-root") == "/hostfs"
    for host, (mount, _) in host_mounts(values).items():
        if host.startswith("/var/lib/kubelet") or host in (STATE_DIR, CDI_DIR):
            continue  # the daemon's own directories are mounted where it uses them, not for backends
        assert mount == f"/hostfs{host}"


def test_flags_point_into_the_mounts() -> None:
    arguments = args(ALL_ON)
    mounts = {path for path, _ in host_mounts(ALL_ON).values()}
    assert flag(arguments, "plugin-dir") in mounts
    socket = flag(arguments, "pod-resources-socket")
    assert socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert socket.rsplit("/", 1)[0] in mounts


def test_pools_configmap_is_mounted_at_the_pools_dir() -> None:
    values = {"pools": {"mountPath": "/etc/pools"}}
    spec = pod_spec(values)
    volume = next(v for v in spec["volumes"] if v["name"] == "pools")
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "pools")
    assert volume["configMap"]["name"] == "hcs-deviceplugin-pools"
    assert mount == {"name": "pools", "mountPath": "/etc/pools", "readOnly": True}
    assert flag(args(values), "pools-dir") == "/etc/pools"


def test_ascend_library_path_points_at_the_mounted_driver() -> None:
    env = {e["name"]: e.get("value") for e in pod_spec(vendor_values("ascend"))["containers"][0]["env"]}
    assert env["LD_LIBRARY_PATH"].split(":")[1] == "/host/usr/local/Ascend/driver/lib64/driver"
    assert "NVIDIA_VISIBLE_DEVICES" not in env


def test_nvidia_runtime_environment() -> None:
    env = {e["name"]: e.get("value") for e in pod_spec(vendor_values("nvidia"))["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert "LD_LIBRARY_PATH" not in env
    assert "runtimeClassName" not in pod_spec()
    assert pod_spec({"runtimeClassName": "nvidia"})["runtimeClassName"] == "nvidia"


def test_custom_host_path_for_a_vendor() -> None:
    values = {"vendors": {"hygon": {"enabled": True, "hostPaths": [{"path": "/usr/local/hyhal"}]}}}
    mounts = host_mounts(values)
    assert mounts["/usr/local/hyhal"] == ("/host/usr/local/hyhal", True)
    assert "/opt/hyhal" not in mounts


@pytest.mark.parametrize("case", CASES)
def test_cdi_dir_is_mounted_read_write_at_its_host_path(case: str) -> None:
    volumes = {v["name"]: v for v in pod_spec(CASES[case])["volumes"]}
    assert volumes["cdi"]["hostPath"] == {"path": CDI_DIR, "type": "DirectoryOrCreate"}
    assert host_mounts(CASES[case])[CDI_DIR] == (CDI_DIR, False)
    assert flag(args(CASES[case]), "cdi-dir") == CDI_DIR


def test_cdi_can_move_or_be_turned_off() -> None:
    moved = {"cdi": {"enabled": True, "dir": "/etc/cdi"}}
    assert host_mounts(moved)["/etc/cdi"] == ("/etc/cdi", False)
    assert flag(args(moved), "cdi-dir") == "/etc/cdi"
    off = {"cdi": {"enabled": False, "dir": CDI_DIR}}
    assert CDI_DIR not in host_mounts(off)
    assert flag(args(off), "cdi-dir") == "", "an empty --cdi-dir writes no specs"


def test_mps_mounts_its_root_and_the_clients_shared_memory_only_when_enabled() -> None:
    assert "/run/nvidia/mps" not in host_mounts({})
    assert flag(args({}), "backend-option") != "nvidia.mpsRoot=/run/nvidia/mps"
    values = {"mps": {"enabled": True, "root": "/run/nvidia/mps"}}
    mounts = host_mounts(values)
    assert mounts["/run/nvidia/mps"] == ("/host/run/nvidia/mps", False)
    assert mounts["/run/nvidia/mps/shm"] == ("/dev/shm", False)
    assert "--backend-option=nvidia.mpsRoot=/run/nvidia/mps" in args(values)
    env = {e["name"]: e.get("value") for e in container(values)["env"]}
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
