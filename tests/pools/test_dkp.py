"""The DKP per-pool format: the shapes gpu-control-plane renders, upstream's rules, and every error path.

The first table holds what the renderer really writes (newer: UUID patterns, the ``^$`` placeholder,
qualified names, a top-level ``plugin`` section; older: ``*`` and bare names; oldest: ``^<uuid>$`` and
``shared``), then the variations POOLS.md and nvidia.md describe.
"""

from __future__ import annotations

import logging
import textwrap

import pytest

from hcs_deviceplugin.model import DeviceDelivery, DeviceSelector, Pool, UnitKind
from hcs_deviceplugin.pools.dkp import parse_dkp_plugin_config
from hcs_deviceplugin.pools.errors import ConfigErrors
from hcs_deviceplugin.pools.objects import ConfigMapObject

NAMESPACE = "d8-gpu-control-plane"
SOURCE = f"configmap {NAMESPACE}/nvidia-device-plugin-team-a-config"
UUID_1 = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
UUID_2 = "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"
NO_ENV: dict[str, str] = {}


def configmap(text: str, name: str = "nvidia-device-plugin-team-a-config", **data: str) -> ConfigMapObject:
    return ConfigMapObject(
        name=name,
        namespace=NAMESPACE,
        data={"config.yaml": textwrap.dedent(text).lstrip("\n"), **data},
        labels={"app": "nvidia-device-plugin", "pool": "team-a"},
        resource_version="41",
        source=SOURCE,
    )


def pool(name: str = "team-a", prefix: str = "gpu.deckhouse.io", **fields: object) -> Pool:
    fields.setdefault("source", SOURCE)
    return Pool(name=name, resource_name=f"{prefix}/{name}", **fields)  # type: ignore[arg-type]


def patterns(*values: str) -> tuple[DeviceSelector, ...]:
    return tuple(DeviceSelector(pattern=v) for v in values)


RENDERED_NEW = f"""
    flags:
      migStrategy: none
      resourcePrefix: gpu.deckhouse.io
    plugin:
      deviceIDStrategy: uuid
      deviceListStrategy: envvar
      passDeviceSpecs: true
    resources:
      gpus:
      - name: gpu.deckhouse.io/team-a
        pattern: {UUID_1}
      - name: gpu.deckhouse.io/team-a
        pattern: {UUID_2}
    sharing:
      timeSlicing:
        resources:
        - name: gpu.deckhouse.io/team-a
          replicas: 4
    version: v1
"""
NEW_OPTIONS = {"migStrategy": "none", "deviceIDStrategy": "uuid", "deviceListStrategy": "envvar"}

VALID = [
    pytest.param(
        RENDERED_NEW,
        [
            pool(
                slices_per_unit=4,
                devices=patterns(UUID_1, UUID_2),
                options={**NEW_OPTIONS, "passDeviceSpecs": "true"},
            )
        ],
        id="rendered-uuid-patterns-qualified-names-replicas-4",
    ),
    pytest.param(
        """
        flags: {migStrategy: none, resourcePrefix: gpu.deckhouse.io}
        plugin: {passDeviceSpecs: true, deviceListStrategy: envvar, deviceIDStrategy: uuid}
        resources:
          gpus:
          - {pattern: ^$, name: gpu.deckhouse.io/team-a}
        version: v1
        """,
        [pool(devices=patterns("^$"), options={**NEW_OPTIONS, "passDeviceSpecs": "true"})],
        id="rendered-placeholder-no-cards-yet",
    ),
    pytest.param(
        """
        version: v1
        flags: {migStrategy: none, resourcePrefix: cluster.gpu.deckhouse.io}
        resources:
          gpus:
          - {pattern: "*", name: team-a}
        sharing:
          timeSlicing:
            resources:
            - {name: team-a, replicas: 2}
        """,
        [
            pool(
                prefix="cluster.gpu.deckhouse.io",
                slices_per_unit=2,
                devices=patterns("*"),
                options={"migStrategy": "none"},
            )
        ],
        id="older-rendering-star-bare-name-cluster-prefix",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: "*", name: cluster.gpu.deckhouse.io/team-a}
        """,
        [pool(prefix="cluster.gpu.deckhouse.io", devices=patterns("*"))],
        id="qualified-name-gives-the-domain-when-no-prefix-is-set",
    ),
    pytest.param(
        """
        resources:
          gpus:
          - {pattern: GPU-1, name: "  gpu.deckhouse.io/ team-a  "}
        """,
        [pool(devices=patterns("GPU-1"))],
        id="name-trimmed-version-optional",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        shared:
          timeSlicing:
            resources:
            - {name: team-a, replicas: 8}
        """,
        [pool(slices_per_unit=8, devices=patterns("GPU-1"))],
        id="legacy-shared-key",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        sharing:
          timeSlicing:
            resources:
            - {name: gpu.deckhouse.io/team-a, replicas: 1}
        """,
        [pool(devices=patterns("GPU-1"))],
        id="replicas-1-is-exclusive",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        sharing:
          timeSlicing:
            renameByDefault: true
            failRequestsGreaterThanOne: true
            resources:
            - {name: team-a, replicas: 64}
        """,
        [
            Pool(
                name="team-a",
                resource_name="gpu.deckhouse.io/team-a.shared",
                slices_per_unit=64,
                devices=patterns("GPU-1"),
                source=SOURCE,
            )
        ],
        id="rename-by-default-advertises-dot-shared",
    ),
    pytest.param(
        """
        version: v1
        flags:
          migStrategy: mixed
          plugin:
            deviceListStrategy: [volume-mounts, cdi-cri, volume-mounts]
            deviceIDStrategy: index
            passDeviceSpecs: false
            cdiAnnotationPrefix: cdi.example.com/
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        """,
        [
            pool(
                devices=patterns("GPU-1"),
                options={
                    "migStrategy": "mixed",
                    "deviceListStrategy": "envvar",
                    "deviceIDStrategy": "index",
                    "passDeviceSpecs": "false",
                    "cdiAnnotationPrefix": "cdi.example.com/",
                },
                device_delivery=DeviceDelivery.CDI_CRI,
            )
        ],
        id="flags-plugin-strategies-list-form-mig-mixed",
    ),
    pytest.param(
        """
        version: v1
        flags: {migStrategy: single, plugin: {deviceIDStrategy: uuid}}
        plugin: {deviceIDStrategy: uuid, deviceListStrategy: cdi-annotations}
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        """,
        [
            pool(
                devices=patterns("GPU-1"),
                options={
                    "migStrategy": "single",
                    "deviceIDStrategy": "uuid",
                    "deviceListStrategy": "envvar",
                },
                device_delivery=DeviceDelivery.CDI_ANNOTATIONS,
            )
        ],
        id="both-plugin-sections-agree-mig-single",
    ),
    pytest.param(
        f"""
        version: v1
        resources:
          gpus:
          - {{pattern: {UUID_1}, name: team-a}}
          - {{pattern: {UUID_2}, name: team-b}}
          - {{pattern: {UUID_1}, name: team-a}}
        sharing:
          timeSlicing:
            resources:
            - {{name: team-b, replicas: 3}}
        """,
        [
            pool(devices=patterns(UUID_1)),
            pool("team-b", slices_per_unit=3, devices=patterns(UUID_2)),
        ],
        id="two-names-two-pools-repeated-pattern-merged",
    ),
    pytest.param(
        """
        version: v1
        flags:
          failOnInitError: false
          nvidiaDriverRoot: /run/nvidia/driver
          gdsEnabled: false
          gfd: {oneshot: true, sleepInterval: 60s}
          plugin: {nvidiaCTKPath: /usr/bin/nvidia-ctk, containerDriverRoot: /driver-root}
        imex: {channelIDs: [0], required: false}
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
          mig: []
        sharing:
          timeSlicing:
            resources:
            - {name: team-a, replicas: 2, devices: all}
        """,
        [pool(slices_per_unit=2, devices=patterns("GPU-1"))],
        id="known-upstream-keys-without-effect-are-accepted",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        sharing:
          mps:
            failRequestsGreaterThanOne: true   # upstream's key; MPS refuses more than one anyway
            resources:
            - {name: gpu.deckhouse.io/team-a, replicas: 4}
        """,
        [pool(slices_per_unit=4, sharing="mps", devices=patterns("GPU-1"))],
        id="mps-is-a-pool-shared-by-mps",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
        sharing:
          mps:
            renameByDefault: true
            resources:
            - {name: team-a, replicas: 2}
        """,
        [
            Pool(
                name="team-a",
                resource_name="gpu.deckhouse.io/team-a.shared",
                slices_per_unit=2,
                sharing="mps",
                devices=patterns("GPU-1"),
                source=SOURCE,
            )
        ],
        id="mps-rename-by-default-advertises-dot-shared",
    ),
    pytest.param(
        """
        version: v1
        resources:
          gpus:
          - {pattern: GPU-1, name: team-a}
          - {pattern: GPU-2, name: team-b}
        shared:
          mps:
            renameByDefault: false
            resources:
            - {name: team-b, replicas: 3}
        """,
        [
            pool(devices=patterns("GPU-1")),
            pool("team-b", slices_per_unit=3, sharing="mps", devices=patterns("GPU-2")),
        ],
        id="mps-shares-only-the-resources-it-names",
    ),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_configs(text: str, expected: list[Pool]) -> None:
    assert parse_dkp_plugin_config(configmap(text), NO_ENV) == expected


def test_legacy_anchored_uuid_is_an_exact_match_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    text = f"""
        version: v1
        resources:
          gpus:
          - {{pattern: "^{UUID_1}$", name: team-a}}
          - {{pattern: "{UUID_2}", name: team-a}}
    """
    with caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools"):
        pools = parse_dkp_plugin_config(configmap(text), NO_ENV)
    assert pools == [pool(devices=(DeviceSelector(uuid=UUID_1), DeviceSelector(pattern=UUID_2)))]
    [record] = caplog.records
    assert record.getMessage() == (
        f"{SOURCE}: config.yaml: resources.gpus[0].pattern: legacy anchored pattern '^{UUID_1}$': "
        f"upstream reads '^' and '$' literally, so it never matched; read as an exact match of '{UUID_1}'"
    )


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        pytest.param(
            "resources: {gpus: [{pattern: '^GPU-1', name: team-a}]}",
            "resources.gpus[0].pattern: pattern '^GPU-1': '^' and '$' are literal characters here",
            id="stray-anchor",
        ),
        pytest.param(
            "flags: {resourcePrefix: gpu.deckhouse.io}\nresources: {gpus: [{pattern: x, name: a.io/team-a}]}",
            "resources.gpus[0].name: names domain 'a.io', but resources are advertised under 'gpu.deckh",
            id="qualified-name-with-another-domain",
        ),
        pytest.param(
            "resources: {gpus: [{pattern: x, name: team-a}]}\n"
            "sharing: {timeSlicing: {resources: [{name: team-a, replicas: 2, rename: other}]}}",
            "sharing.timeSlicing.resources[0].rename: ignored, as upstream does",
            id="rename-ignored",
        ),
        pytest.param(
            "resources: {gpus: [{pattern: x, name: team-a}]}\n"
            "sharing: {timeSlicing: {resources: [{name: team-a, replicas: 2, devices: [0, 1]}]}}",
            "sharing.timeSlicing.resources[0].devices: ignored, as upstream does",
            id="devices-ignored",
        ),
        pytest.param(
            "resources: {gpus: [{pattern: x, name: team-a}]}\n"
            "sharing: {mps: {failRequestsGreaterThanOne: false, resources: [{name: team-a, replicas: 2}]}}",
            "sharing.mps.failRequestsGreaterThanOne: false is ignored: an MPS pool always refuses",
            id="mps-fail-requests-false-ignored",
        ),
    ],
)
def test_warnings(text: str, warning: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools"):
        assert len(parse_dkp_plugin_config(configmap(text), NO_ENV)) == 1
    assert [r.getMessage() for r in caplog.records if warning in r.getMessage()], caplog.text


def test_no_warnings_for_the_rendered_shapes(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hcs_deviceplugin.pools"):
        parse_dkp_plugin_config(configmap(RENDERED_NEW), NO_ENV)
    assert caplog.records == []


@pytest.mark.parametrize(
    ("env", "resource"),
    [
        pytest.param({}, "gpu.deckhouse.io/team-a", id="flags"),
        pytest.param({"NVIDIA_RESOURCE_PREFIX": ""}, "gpu.deckhouse.io/team-a", id="empty-env-is-unset"),
        pytest.param(
            {"NVIDIA_RESOURCE_PREFIX": "cluster.gpu.deckhouse.io"},
            "cluster.gpu.deckhouse.io/team-a",
            id="env-overrides-flags",
        ),
    ],
)
def test_resource_prefix_env_overrides_flags(env: dict[str, str], resource: str) -> None:
    [parsed] = parse_dkp_plugin_config(configmap(RENDERED_NEW), env)
    assert parsed.resource_name == resource


def test_env_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVIDIA_RESOURCE_PREFIX", "example.com")
    [parsed] = parse_dkp_plugin_config(configmap(RENDERED_NEW))
    assert parsed.resource_name == "example.com/team-a"


def gpus(body: str = "", sharing: str = "") -> str:
    """A valid config for pool team-a on card GPU-1 with ``body`` added at the top level."""
    text = "version: v1\nresources:\n  gpus:\n  - {pattern: GPU-1, name: team-a}\n" + body
    return text + (f"sharing:\n  timeSlicing:\n    resources:\n    - {sharing}\n" if sharing else "")


def case(text: str, *expected: tuple[str, str], id: str) -> object:
    return pytest.param(text, list(expected), id=id)


def shares(entries: str) -> str:
    return gpus(sharing=entries)


PLUGIN_LIST = "must be one of envvar, volume-mounts, cdi-annotations, cdi-cri"

# (path, substring of message), in the order reported.
INVALID = [
    case(
        "resource: {}\n", ("resource", "did you mean 'resources'?"), ("resources.gpus", "required"), id="typo"
    ),
    case(
        gpus("flags: {migstrategy: none}\n"),
        ("flags.migstrategy", "did you mean 'migStrategy'?"),
        id="flag-case",
    ),
    case(
        gpus("flags: {plugin: {deviceListStrategyy: x}}\n"),
        ("flags.plugin.deviceListStrategyy", "unknown"),
        id="fp",
    ),
    case(gpus("plugin: {bogus: 1}\n"), ("plugin.bogus", "unknown key"), id="plugin-unknown"),
    case(
        gpus("flags: {gfd: {oneShot: true}}\n"),
        ("flags.gfd.oneShot", "did you mean 'oneshot'?"),
        id="gfd-key",
    ),
    case(gpus("imex: {channels: [0]}\n"), ("imex.channels", "unknown key"), id="imex-key"),
    case(
        "version: v2\nresources: {gpus: [{pattern: x, name: a}]}\n",
        ("version", "must be 'v1', got string 'v2'"),
        id="version-v2",
    ),
    case(
        "- a\n", ("<document>", "must be a mapping (an NVIDIA device plugin config), got a list"), id="list"
    ),
    case("", ("<document>", "empty; needs resources.gpus"), id="empty"),
    case("version: v1\n", ("resources.gpus", "required"), id="no-resources"),
    case("resources: {gpus: []}\n", ("resources.gpus", "must not be empty"), id="gpus-empty"),
    case(
        "resources: {gpus: {pattern: x}}\n",
        ("resources.gpus", "must be a list, got a mapping"),
        id="gpus-map",
    ),
    case(
        "resources: {gpus: [GPU-1]}\n",
        ("resources.gpus[0]", "must be a mapping with pattern and name"),
        id="gpu-str",
    ),
    case("resources: {gpus: [{name: a}]}\n", ("resources.gpus[0].pattern", "required"), id="no-pattern"),
    case("resources: {gpus: [{pattern: x}]}\n", ("resources.gpus[0].name", "required"), id="no-name"),
    case(
        "resources: {gpus: [{pattern: '', name: a}]}\n",
        ("resources.gpus[0].pattern", "must not be empty (upstream reads it as every card)"),
        id="empty-pattern",
    ),
    case(
        "resources: {gpus: [{pattern: 12, name: a}]}\n",
        ("resources.gpus[0].pattern", "must be a string, got integer 12; quote it"),
        id="pattern-int",
    ),
    case(
        "resources: {gpus: [{pattern: x, name: Team_A}]}\n",
        ("resources.gpus[0].name", "pool name 'Team_A' (the last segment of 'Team_A')"),
        id="bad-name",
    ),
    case(
        "resources: {gpus: [{pattern: x, name: gpu.deckhouse.io/}]}\n",
        ("resources.gpus[0].name", "must not be empty"),
        id="qualified-name-without-name",
    ),
    case(
        "resources: {gpus: [{pattern: x, name: a, patern: y}]}\n",
        ("resources.gpus[0].patern", "did you mean 'pattern'?"),
        id="gpu-key-typo",
    ),
    case(
        "resources: {gpus: [{pattern: x, name: a}], migs: [{pattern: x, name: m}]}\n",
        ("resources.migs", "MIG resources are not supported"),
        id="mig-resources",
    ),
    case(
        shares("{name: team-a, replicas: 0}"),
        ("sharing.timeSlicing.resources[0].replicas", "must be 1..64, got 0"),
        id="replicas-0",
    ),
    case(
        shares("{name: team-a, replicas: 65}"),
        ("sharing.timeSlicing.resources[0].replicas", "must be 1..64, got 65"),
        id="replicas-65",
    ),
    case(
        shares("{name: team-a, replicas: '4'}"),
        ("sharing.timeSlicing.resources[0].replicas", "must be an integer, got string '4'"),
        id="replicas-string",
    ),
    case(
        shares("{name: team-a}"), ("sharing.timeSlicing.resources[0].replicas", "required"), id="no-replicas"
    ),
    case(
        shares("{replicas: 2}"), ("sharing.timeSlicing.resources[0].name", "required"), id="replicas-no-name"
    ),
    case(
        shares("{name: team-b, replicas: 2}"),
        (
            "sharing.timeSlicing.resources[0].name",
            "'team-b' names no resource of resources.gpus (defined: team-a)",
        ),
        id="replicas-for-unknown-resource",
    ),
    case(
        shares("{name: team-a, replicas: 2}\n    - {name: gpu.deckhouse.io/team-a, replicas: 4}"),
        (
            "sharing.timeSlicing.resources[1].name",
            "replicas for 'team-a' are already given at sharing.timeSli",
        ),
        id="replicas-twice",
    ),
    case(
        shares("{name: team-a, replicas: 2, replica: 3}"),
        ("sharing.timeSlicing.resources[0].replica", "did you mean 'replicas'?"),
        id="replicas-typo",
    ),
    case(
        gpus("sharing: {mps: {resources: [{name: team-a, replicas: 1}]}}\n"),
        ("sharing.mps", "MPS needs at least 2 replicas of 'team-a', got 1"),
        id="mps-one-replica",
    ),
    case(
        gpus("sharing: {mps: {resources: [{name: team-b, replicas: 2}]}}\n"),
        ("sharing.mps.resources[0].name", "'team-b' names no resource of resources.gpus (defined: team-a)"),
        id="mps-replicas-for-unknown-resource",
    ),
    case(
        gpus("sharing: {mps: {failRequestsGreaterThanOne: yes please}}\n"),
        ("sharing.mps.failRequestsGreaterThanOne", "must be true or false, got string 'yes please'"),
        id="mps-fail-requests-greater-than-one",
    ),
    case(
        gpus("sharing: {mps: {strategy: packed, resources: [{name: team-a, replicas: 2}]}}\n"),
        ("sharing.mps.strategy", "unknown key"),
        id="mps-strategy",
    ),
    case(
        gpus("sharing: {timeSlicing: {resources: []}, mps: {resources: [{name: team-a, replicas: 2}]}}\n"),
        ("sharing", "give one of timeSlicing and mps, not both"),
        id="mps-and-time-slicing",
    ),
    case(
        gpus("sharing: {mps: [1]}\n"),
        ("sharing.mps", "must be a mapping, got a list"),
        id="mps-list",
    ),
    case(
        gpus("sharing: {timeSlicing: {resources: []}}\nshared: {timeSlicing: {resources: []}}\n"),
        ("shared", "give sharing or its older name shared, not both"),
        id="sharing-and-shared",
    ),
    case(
        gpus("sharing: {timeSlicing: {renameByDefault: 'yes'}}\n"),
        ("sharing.timeSlicing.renameByDefault", "must be true or false, got string 'yes'"),
        id="rename-not-bool",
    ),
    case(
        gpus("sharing: {timeSlicing: {strategy: packed}}\n"),
        ("sharing.timeSlicing.strategy", "unknown time-slicing strategy"),
        id="strategy",
    ),
    case(gpus("sharing: [1]\n"), ("sharing", "must be a mapping, got a list"), id="sharing-list"),
    case(
        gpus("flags: {migStrategy: some}\n"),
        ("flags.migStrategy", "must be one of none, single, mixed, got string 'some'"),
        id="mig-strategy",
    ),
    case(gpus("flags: {migStrategy: None}\n"), ("flags.migStrategy", "got string 'None'"), id="mig-case"),
    case(
        gpus("plugin: {deviceListStrategy: envar}\n"),
        ("plugin.deviceListStrategy", f"{PLUGIN_LIST}, got string 'envar'"),
        id="list-strategy",
    ),
    case(
        gpus("plugin: {deviceListStrategy: 'envvar,cdi-cri'}\n"),
        ("plugin.deviceListStrategy", "got string 'envvar,cdi-cri'"),
        id="list-strategy-comma-string",
    ),
    case(
        gpus("plugin: {deviceListStrategy: [envvar, bogus]}\n"),
        ("plugin.deviceListStrategy[1]", "got string 'bogus'"),
        id="list-strategy-item",
    ),
    case(
        gpus("plugin: {deviceListStrategy: []}\n"),
        ("plugin.deviceListStrategy", "non-empty list"),
        id="list-strategy-empty",
    ),
    case(
        gpus("flags: {plugin: {deviceIDStrategy: serial}}\n"),
        ("flags.plugin.deviceIDStrategy", "must be one of uuid, index"),
        id="id-strategy",
    ),
    case(
        gpus("plugin: {passDeviceSpecs: 'true'}\n"),
        ("plugin.passDeviceSpecs", "must be true or false, got string 'true'"),
        id="pass-device-specs-string",
    ),
    case(
        gpus("flags: {plugin: {deviceIDStrategy: index}}\nplugin: {deviceIDStrategy: uuid}\n"),
        ("plugin.deviceIDStrategy", "'uuid' conflicts with flags.plugin.deviceIDStrategy 'index'"),
        id="plugin-sections-disagree",
    ),
    case(
        gpus("flags: {resourcePrefix: Example.COM}\n"),
        ("flags.resourcePrefix", "not usable as a resource name's domain"),
        id="prefix-invalid",
    ),
    case(
        gpus("flags: {resourcePrefix: 7}\n"),
        ("flags.resourcePrefix", "must be a string, got integer 7"),
        id="prefix-int",
    ),
    case(
        "resources:\n  gpus: [{pattern: x, name: a}\n", ("<document>", "invalid YAML at line 3"), id="syntax"
    ),
    case(
        "resources: {gpus: [{pattern: x, name: a}]}\nresources: {}\n",
        ("<document>", "found duplicate key 'resources'"),
        id="duplicate-key",
    ),
    case("[" * 5000, ("<document>", "nested too deeply to read"), id="deep-nesting"),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_invalid_configs(text: str, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_dkp_plugin_config(configmap(text), NO_ENV)
    errors = caught.value.errors
    assert [e.path for e in errors] == [f"config.yaml: {path}" for path, _ in expected], errors
    for error, (_, fragment) in zip(errors, expected, strict=True):
        assert error.source == SOURCE
        assert fragment in error.message, error


def test_invalid_env_prefix_is_reported_at_the_field_it_overrides() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_dkp_plugin_config(configmap(RENDERED_NEW), {"NVIDIA_RESOURCE_PREFIX": "bad/prefix"})
    [error] = caught.value.errors
    assert error.path == "config.yaml: flags.resourcePrefix"
    assert error.message.startswith("NVIDIA_RESOURCE_PREFIX='bad/prefix' (which overrides it) is not usable")


def test_key_problems_are_reported_against_the_object() -> None:
    obj = ConfigMapObject(name="nvidia-device-plugin-x-config", data={"values.yaml": "a: 1"}, source="cm")
    with pytest.raises(ConfigErrors) as caught:
        parse_dkp_plugin_config(obj, NO_ENV)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("data", "needs the key config.yaml (the NVIDIA plugin config)"),
        ("values.yaml", "unexpected key; a DKP per-pool ConfigMap holds only config.yaml"),
    ]


def test_extra_key_beside_a_valid_config_is_an_error() -> None:
    with pytest.raises(ConfigErrors) as caught:
        parse_dkp_plugin_config(configmap(RENDERED_NEW, README="hello"), NO_ENV)
    assert [e.path for e in caught.value.errors] == ["README"]


def test_every_error_is_reported_at_once() -> None:
    text = """
        version: v3
        flags: {migStrategy: some}
        resources:
          gpus:
          - {pattern: '', name: Bad}
        sharing:
          timeSlicing:
            resources:
            - {name: nobody, replicas: 99}
    """
    with pytest.raises(ConfigErrors) as caught:
        parse_dkp_plugin_config(configmap(text), NO_ENV)
    assert [e.path.removeprefix("config.yaml: ") for e in caught.value.errors] == [
        "version",
        "flags.migStrategy",
        "resources.gpus[0].pattern",
        "resources.gpus[0].name",
        "sharing.timeSlicing.resources[0].name",
        "sharing.timeSlicing.resources[0].replicas",
    ]


def test_pools_are_card_pools_whatever_the_mig_strategy() -> None:
    for strategy in ("none", "single", "mixed"):
        text = gpus(f"flags: {{migStrategy: {strategy}}}\n")
        [parsed] = parse_dkp_plugin_config(configmap(text), NO_ENV)
        assert (parsed.unit, parsed.options["migStrategy"]) == (UnitKind.CARD, strategy)
