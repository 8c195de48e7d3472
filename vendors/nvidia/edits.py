"""ContainerEdits for NVIDIA units, built as NVIDIA's device plugin builds Allocate (nvidia.md §3.5-3.6).

Pure: the inputs are discovered Cards/Partitions (with the vendor facts in their attributes) and the
pool's options; no NVML call and no file access, so Allocate stays fast and cannot fail on a sick
library (ARCHITECTURE.md invariant 7).

Options (pool options override the backend's defaults):
- ``deviceListStrategy``: comma list of ``envvar`` (default), ``volume-mounts``, ``cdi-annotations``,
  ``cdi-cri``. With only CDI strategies the response carries no env, mounts or device nodes.
- ``deviceIDStrategy``: ``uuid`` (default) or ``index`` (``"0"``, MIG ``"<gpu>:<migSlot>"``).
- ``passDeviceSpecs``: ``true`` (default) / ``false``; device nodes for the cards, MIG capability nodes
  and the node-wide control devices that exist on the host. Upstream defaults to ``false``; we default
  to ``true`` as DKP's rendered configs set it, because devices that are in the container's OCI spec
  keep working after ``systemctl daemon-reload`` (with the systemd cgroup driver, a reload rewrites
  the container's device cgroup from the spec, and GPUs injected only by the NVIDIA hook are lost).
- ``devRoot``: host prefix of device node paths (default ``/``).
- ``cdiAnnotationPrefix`` (default ``cdi.k8s.io/``), ``cdiKind`` (default ``nvidia.com/gpu``, the kind
  ``nvidia-ctk cdi generate`` writes; NVIDIA's plugin uses ``k8s.device-plugin.nvidia.com/gpu`` for the
  spec it generates itself, which we do not).
- ``migStrategy`` is accepted and does not change the edits (it decides what is advertised).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Card, ContainerEdits, DeviceNode, Mount, Partition, Unit
from vendors.nvidia import attributes as attr

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"
LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
ID_STRATEGIES = ("uuid", "index")
MIG_STRATEGIES = ("none", "single", "mixed")
_CDI_ANNOTATION_NAMESPACE = "7b0a4e1d-51f2-4a5e-8c0d-6f6b1c3e9a10"
"""The UUID namespace of the ``cdi-annotations`` key; ``uuid`` is imported by the one call that
needs it, so a start (which never allocates) does not load it."""


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared or hashed: only its fields are read
class EditOptions:
    """How to describe devices to the container runtime; see the module docstring."""

    list_strategies: tuple[str, ...] = ("envvar",)
    id_strategy: str = "uuid"
    pass_device_specs: bool = True
    dev_root: str = "/"
    cdi_annotation_prefix: str = "cdi.k8s.io/"
    cdi_kind: str = "nvidia.com/gpu"

    @property
    def cdi_only(self) -> bool:
        return all(s.startswith("cdi-") for s in self.list_strategies)


def spec_edit_options(base: EditOptions) -> EditOptions:
    """Options for a CDI spec entry: device nodes always, nothing that only signals a runtime."""
    return replace(base, list_strategies=("envvar",), pass_device_specs=True)


def _parse_list(value: str) -> tuple[str, ...]:
    items = [v.strip().strip("'\"") for v in value.strip().strip("[]").replace(" ", ",").split(",")]
    return tuple(dict.fromkeys(v for v in items if v))


def _parse_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", ""):
        return False
    raise ValueError(f"{key} must be true or false, not {value!r}")


def parse_edit_options(options: Mapping[str, str] | None, base: EditOptions | None = None) -> EditOptions:
    """``base`` overridden by the known keys of ``options``; a bad value is a ValueError, never a default."""
    result = base or EditOptions()
    if not options:
        return result
    if "deviceListStrategy" in options:
        strategies = _parse_list(options["deviceListStrategy"])
        unknown = [s for s in strategies if s not in LIST_STRATEGIES]
        if unknown or not strategies:
            raise ValueError(
                f"deviceListStrategy {options['deviceListStrategy']!r}: "
                f"expected a list of {', '.join(LIST_STRATEGIES)}"
            )
        result = replace(result, list_strategies=strategies)
    if "deviceIDStrategy" in options:
        id_strategy = options["deviceIDStrategy"].strip()
        if id_strategy not in ID_STRATEGIES:
            raise ValueError(f"deviceIDStrategy must be uuid or index, not {id_strategy!r}")
        result = replace(result, id_strategy=id_strategy)
    if "passDeviceSpecs" in options:
        result = replace(result, pass_device_specs=_parse_bool("passDeviceSpecs", options["passDeviceSpecs"]))
    if "migStrategy" in options and options["migStrategy"].strip() not in MIG_STRATEGIES:
        raise ValueError(
            f"migStrategy must be one of {', '.join(MIG_STRATEGIES)}, not {options['migStrategy']!r}"
        )
    if "devRoot" in options:
        result = replace(result, dev_root=options["devRoot"].strip() or "/")
    if "cdiAnnotationPrefix" in options:
        result = replace(result, cdi_annotation_prefix=options["cdiAnnotationPrefix"].strip())
    if "cdiKind" in options:
        result = replace(result, cdi_kind=options["cdiKind"].strip())
    return result


# Made and read within one container_edits call on one thread: not frozen, so a start compiles
# no __setattr__ or __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class _Target:
    """One distinct card or MIG device a request touches."""

    uuid: str
    index_id: str
    device_paths: tuple[str, ...]
    control_devices: tuple[str, ...]


def _target(hardware_id: str, cards: Mapping[str, Card], partitions: Mapping[str, Partition]) -> _Target:
    partition = partitions.get(hardware_id)
    if partition is not None:
        card = cards.get(partition.card_id)
        a = partition.attributes
        paths = [f"/dev/nvidia{a[attr.PARENT_MINOR]}"]
        paths += [a[k] for k in (attr.CAP_GPU_INSTANCE, attr.CAP_COMPUTE_INSTANCE) if k in a]
        control = card.attributes.get(attr.CONTROL_DEVICES, "") if card else ""
        return _Target(
            uuid=partition.id,
            index_id=f"{a[attr.PARENT_INDEX]}:{a[attr.MIG_INDEX]}",
            device_paths=tuple(paths),
            control_devices=tuple(p for p in control.split(",") if p),
        )
    card = cards.get(hardware_id)
    if card is None:
        raise ValueError(f"unknown NVIDIA device {hardware_id!r}")
    control = card.attributes.get(attr.CONTROL_DEVICES, "")
    return _Target(
        uuid=card.id,
        index_id=card.attributes.get(attr.INDEX, str(card.index)),
        device_paths=(f"/dev/nvidia{card.attributes[attr.MINOR]}",),
        control_devices=tuple(p for p in control.split(",") if p),
    )


def _host_path(dev_root: str, path: str) -> str:
    return posixpath.join(dev_root, path.lstrip("/")) if dev_root not in ("", "/") else path


def container_edits(
    units: Sequence[Unit],
    cards: Mapping[str, Card],
    partitions: Mapping[str, Partition],
    options: EditOptions,
) -> ContainerEdits:
    """Env, mounts, device nodes, CDI names and annotations for ``units``; replicas of a device count once."""
    hardware = list(dict.fromkeys(u.hardware_id for u in units))
    targets = [_target(h, cards, partitions) for h in hardware]
    ids = [t.index_id if options.id_strategy == "index" else t.uuid for t in targets]

    env: dict[str, str] = {}
    mounts: list[Mount] = []
    devices: list[DeviceNode] = []
    annotations: dict[str, str] = {}
    cdi_devices: tuple[str, ...] = ()
    if "envvar" in options.list_strategies:
        env[VISIBLE_DEVICES] = ",".join(ids)
    if "volume-mounts" in options.list_strategies:
        env[VISIBLE_DEVICES] = VOLUME_MOUNTS_ROOT
        mounts = [
            Mount(container_path=f"{VOLUME_MOUNTS_ROOT}/{i}", host_path="/dev/null", read_only=False)
            for i in ids
        ]
    cdi_names = [f"{options.cdi_kind}={i}" for i in ids]
    if "cdi-annotations" in options.list_strategies and cdi_names:
        import uuid

        namespace = uuid.UUID(_CDI_ANNOTATION_NAMESPACE)
        key = f"nvidia-device-plugin_{uuid.uuid5(namespace, ','.join(cdi_names))}"
        annotations[options.cdi_annotation_prefix + key] = ",".join(cdi_names)
    if "cdi-cri" in options.list_strategies:
        cdi_devices = tuple(cdi_names)
    if options.pass_device_specs and not options.cdi_only:
        paths = [p for t in targets for p in t.control_devices] + [p for t in targets for p in t.device_paths]
        devices = [
            DeviceNode(container_path=p, host_path=_host_path(options.dev_root, p), permissions="rw")
            for p in dict.fromkeys(paths)
        ]
    return ContainerEdits(
        env=env,
        devices=tuple(devices),
        mounts=tuple(mounts),
        annotations=annotations,
        cdi_devices=cdi_devices,
    )
