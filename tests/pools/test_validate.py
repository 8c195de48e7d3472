"""``validate-config``: the same errors as the daemon, a line per valid object, and the exit status."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from hcs_deviceplugin.pools.validate import main
from tests.pools.test_directory import ConfigMapVolume, pools_doc

UUID = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
DKP_SOURCE = "configmap d8-gpu-control-plane/nvidia-device-plugin-team-a-config"
ADR_SOURCE = "configmap d8-gpu-control-plane/gpu-device-plugin-a100"

MANIFESTS = textwrap.dedent(
    f"""
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: nvidia-device-plugin-team-a-config
      namespace: d8-gpu-control-plane
      labels: {{app: nvidia-device-plugin, pool: team-a}}
    data:
      config.yaml: |
        version: v1
        flags: {{migStrategy: none, resourcePrefix: gpu.deckhouse.io}}
        resources:
          gpus:
          - {{pattern: {UUID}, name: gpu.deckhouse.io/team-a}}
        sharing:
          timeSlicing:
            resources:
            - {{name: gpu.deckhouse.io/team-a, replicas: 4}}
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata: {{name: gpu-device-plugin-a100, namespace: d8-gpu-control-plane}}
    data:
      DP_ALLOWED_DEVICES: |
        k8s-w1-0-10de-2203
        k8s-w1-1-10de-2203
    """
).lstrip("\n")


def run(*paths: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(p) for p in paths], out, err, env={})
    return code, out.getvalue(), err.getvalue()


def test_valid_manifests(tmp_path: Path) -> None:
    path = tmp_path / "cms.yaml"
    path.write_text(MANIFESTS)
    assert run(path) == (
        0,
        f"{DKP_SOURCE}: valid dkp-per-pool config, "
        "pools: team-a (gpu.deckhouse.io/team-a, Card x4, 1 device entry)\n"
        f"{ADR_SOURCE}: valid dkp-allowlist config, "
        "pools: a100 (gpu.deckhouse.io/a100, Card, 2 device entries)\n"
        "2 object(s), 2 pool(s), 0 error(s)\n",
        "",
    )


def test_errors_are_printed_as_the_daemon_logs_them(tmp_path: Path) -> None:
    path = tmp_path / "cms.yaml"
    path.write_text(MANIFESTS.replace("replicas: 4", "replicas: 0").replace("k8s-w1-1-10de-2203", "worker-1"))
    code, out, err = run(path)
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"{ADR_SOURCE}: DP_ALLOWED_DEVICES: line 2: 'worker-1' is not an inventoryID: "
        "<node>-<slot>-<pciVendor>-<pciDevice> in lower case, at most 63 characters, "
        "e.g. 'k8s-w1-0-10de-2203'",
        f"{DKP_SOURCE}: config.yaml: sharing.timeSlicing.resources[0].replicas: must be 1..64, got 0",
        "2 object(s), 0 pool(s), 2 error(s)",
    ]


def test_kind_list_and_bad_manifest_entries(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: List
            items:
            - kind: ConfigMap
              metadata: {name: hcs-deviceplugin-pools}
              data: {pools.yaml: "version: v1\\npools: [{name: a}]"}
            - {kind: Secret, metadata: {name: s}}
            - {kind: ConfigMap, metadata: {name: n}, data: {pools.yaml: 42}}
            - {kind: ConfigMap, metadata: {}}
            """
        )
    )
    code, out, _ = run(path)
    assert code == 1
    assert out.splitlines() == [
        f"{path}: documents[0].items[1].kind: must be ConfigMap or List, got string 'Secret'",
        f"{path}: documents[0].items[2].data.pools.yaml: must be a string (quote it), got integer 42",
        f"{path}: documents[0].items[3].metadata.name: must be a non-empty string, got null",
        "configmap hcs-deviceplugin-pools: valid native config, "
        "pools: a (gpu.deckhouse.io/a, Card, 0 device entries)",
        "1 object(s), 1 pool(s), 3 error(s)",
    ]


def test_raw_native_files(tmp_path: Path) -> None:
    good, bad, json = tmp_path / "pools.yaml", tmp_path / "bad.yaml", tmp_path / "more.json"
    good.write_text(pools_doc("a", slices=2))
    bad.write_text("version: v1\npools:\n  - name: b\n    slicesPerUnit: 0\n")
    json.write_text('{\n\t"version": "v1", "pools": [{"name": "c"}]\n}')
    code, out, _ = run(good, bad, json)
    assert code == 1
    assert out.splitlines() == [
        f"{bad}: pools[0].slicesPerUnit: must be 1..64, got 0",
        f"{good}: valid native config, pools: a (gpu.deckhouse.io/a, Card x2, 0 device entries)",
        f"{json}: valid native config, pools: c (gpu.deckhouse.io/c, Card, 0 device entries)",
        "3 object(s), 2 pool(s), 1 error(s)",
    ]


def test_a_yaml_syntax_error_in_a_raw_file(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text("version: v1\npools: [\n")
    code, out, _ = run(path)
    assert code == 1
    assert out.splitlines()[0].startswith(f"{path}: <document>: invalid YAML at line 3, column 1")


def test_a_mounted_directory(tmp_path: Path) -> None:
    ConfigMapVolume(
        tmp_path / "nvidia-device-plugin-team-a-config",
        {"config.yaml": f"resources: {{gpus: [{{pattern: '^{UUID}$', name: team-a}}]}}\n"},
    )
    (tmp_path / "top.yaml").write_text(pools_doc("top"))
    code, out, _ = run(tmp_path)
    assert code == 0
    lines = out.splitlines()
    cm = tmp_path / "nvidia-device-plugin-team-a-config"
    assert lines[0].startswith(
        f"warning: {cm}: config.yaml: resources.gpus[0].pattern: legacy anchored pattern"
    )
    assert lines[1:] == [
        f"{tmp_path / 'top.yaml'}: valid native config, "
        "pools: top (gpu.deckhouse.io/top, Card, 0 device entries)",
        f"{cm}: valid dkp-per-pool config, pools: team-a (gpu.deckhouse.io/team-a, Card, 1 device entry)",
        "2 object(s), 2 pool(s), 0 error(s)",
    ]


def test_pools_defined_twice_and_cards_claimed_twice(tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("version: v1\npools:\n  - {name: a, devices: [{uuid: GPU-1}]}\n")
    two.write_text("version: v1\npools:\n  - {name: a}\n  - {name: b, devices: [{uuid: GPU-1}]}\n")
    code, out, _ = run(one, two)
    assert code == 1
    assert out.splitlines() == [
        f"{two}: pools[0].name: pool 'a' is also defined in {one}, which wins; this definition is ignored",
        f"{one}: valid native config, pools: a (gpu.deckhouse.io/a, Card, 1 device entry)",
        "warning: uuid=GPU-1 is claimed by pools a, b: none of them gets it",
        "2 object(s), 2 pool(s), 1 error(s)",
    ]


@pytest.mark.parametrize("args", [[], ["missing.yaml"]], ids=["no-paths", "missing-file"])
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(*args)
    assert code == 2
    assert err.startswith("usage:") if not args else err.startswith("missing.yaml: cannot read: No such file")


def test_an_unreadable_path_still_checks_the_others(tmp_path: Path) -> None:
    good = tmp_path / "pools.yaml"
    good.write_text(pools_doc("a"))
    code, out, err = run(tmp_path / "nope.yaml", good)
    assert code == 2
    assert "valid native config" in out
    assert err == f"{tmp_path / 'nope.yaml'}: cannot read: No such file or directory\n"


def test_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_bytes(b"version: v1\xff\n")
    code, out, _ = run(path)
    assert code == 1
    assert out.splitlines()[0] == f"{path}: <file>: not UTF-8: invalid start byte at byte 11"


def test_star_patterns_of_two_dkp_pools_are_flagged(tmp_path: Path) -> None:
    for pool in ("a", "b"):
        config = f"version: v1\nresources: {{gpus: [{{pattern: '*', name: {pool}}}]}}\n"
        ConfigMapVolume(tmp_path / f"nvidia-device-plugin-{pool}-config", {"config.yaml": config})
    code, out, _ = run(tmp_path)
    assert code == 0, "valid as config; the conflict is resolved at apply time"
    assert "warning: pattern=* is claimed by pools a, b: none of them gets it" in out.splitlines()


def test_a_dkp_per_pool_config_shared_by_mps(tmp_path: Path) -> None:
    path = tmp_path / "cms.yaml"
    path.write_text(MANIFESTS.split("---")[0].replace("timeSlicing:", "mps:"))
    assert run(path) == (
        0,
        f"{DKP_SOURCE}: valid dkp-per-pool config, "
        "pools: team-a (gpu.deckhouse.io/team-a, Card x4 mps, 1 device entry)\n"
        "1 object(s), 1 pool(s), 0 error(s)\n",
        "",
    )
