"""ContainerEdits for Ascend chips and vNPUs, as Huawei's plugin and Ascend Docker Runtime build them (§4).

Pure: the inputs are discovered Cards/Partitions (phy id, vNPU id and family in their attributes) and
the host facts captured at discovery (which control device nodes and driver paths exist); no DCMI call
and no file access, so Allocate stays fast and cannot hang on a sick chip (ARCHITECTURE.md inv. 7).

Two modes, as the facts recommend:
- default (plain containerd): ``DeviceSpec``s - ``/dev/davinci<phy>`` per chip, for a vNPU host
  ``/dev/vdavinci<vdev>`` as ``/dev/davinci<vdev>`` - plus the node-wide ``/dev/davinci_manager``,
  ``/dev/devmm_svm``, ``/dev/hisi_hdc`` (and ``/dev/dvpp_cmdlist`` and the 310B media nodes where the
  host has them), and read-only driver mounts (option ``driverMounts``, default the driver tree,
  ``/usr/local/dcmi`` and ``npu-smi``; only paths present on the host are mounted);
- ``useAscendDocker=true`` (a node with Ascend Docker Runtime): environment only; the runtime adds the
  device nodes and driver files itself.
Both set ``ASCEND_VISIBLE_DEVICES`` to the sorted phy ids (or vNPU ids: sorted, §7 "Logical vs physical
IDs") and ``ASCEND_RUNTIME_OPTIONS`` to ``VIRTUAL`` for vNPUs, empty otherwise, as the plugin does;
310B adds ``ASCEND_ALLOW_LINK=True``.

``ASCEND_RT_VISIBLE_DEVICES`` (not set by Huawei's plugin) is ``0,1,…,k-1`` for ``k`` devices: inside
the container CANN numbers the devices it can open 0..k-1 in the order of the sorted ids above, so
logical device ``i`` is the ``i``-th id of ``ASCEND_VISIBLE_DEVICES``. Without it, frameworks that read
it (torch_npu, vLLM-Ascend) open host ids such as ``4`` that do not exist in a container holding
non-first chips ("open device 1 failed", "Invalid device ID"; ascend.md §7).

``LD_LIBRARY_PATH`` is left alone: setting it would replace the image's own value, and the runtime
that would prepend to it is exactly what the default mode lacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hcs_deviceplugin.model import Card, ContainerEdits, DeviceNode, Mount, Partition, Unit
from vendors.ascend import attributes as attr

VISIBLE_DEVICES = "ASCEND_VISIBLE_DEVICES"
RT_VISIBLE_DEVICES = "ASCEND_RT_VISIBLE_DEVICES"
RUNTIME_OPTIONS = "ASCEND_RUNTIME_OPTIONS"
ALLOW_LINK = "ASCEND_ALLOW_LINK"
VIRTUAL = "VIRTUAL"

REQUIRED_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
OPTIONAL_CONTROL_DEVICES = ("/dev/dvpp_cmdlist",)
# 310B (Atlas 200I/500 A2): host path → container path, each only when present.
SOC_310B_DEVICES = (
    ("/dev/davinci_manager_docker", "/dev/davinci_manager"),
    ("/dev/pngd", "/dev/pngd"),
    ("/dev/venc", "/dev/venc"),
    ("/dev/acodec", "/dev/acodec"),
    ("/dev/ai", "/dev/ai"),
    ("/dev/ao", "/dev/ao"),
    ("/dev/vo", "/dev/vo"),
    ("/dev/hdmi", "/dev/hdmi"),
)
DEFAULT_DRIVER_MOUNTS = ("/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi")


@dataclass(frozen=True)
class HostFacts:
    """What exists on the host, read at discovery: control device nodes (host, container) and mounts."""

    control_devices: tuple[tuple[str, str], ...] = ()
    driver_mounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class EditOptions:
    use_ascend_docker: bool = False


def parse_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", ""):
        return False
    raise ValueError(f"{key} must be true or false, not {value!r}")


def parse_edit_options(options: Mapping[str, str] | None, base: EditOptions | None = None) -> EditOptions:
    """``base`` overridden by the known keys of ``options`` (pool options); a bad value is an error."""
    result = base or EditOptions()
    if options and "useAscendDocker" in options:
        result = replace(result, use_ascend_docker=parse_bool("useAscendDocker", options["useAscendDocker"]))
    return result


@dataclass(frozen=True)
class _Target:
    visible_id: int
    host_path: str
    container_path: str
    virtual: bool
    family: str


def _target(hardware_id: str, cards: Mapping[str, Card], partitions: Mapping[str, Partition]) -> _Target:
    partition = partitions.get(hardware_id)
    if partition is not None:
        vdev = int(partition.attributes[attr.VDEV_ID])
        parent = cards.get(partition.card_id)
        family = parent.attributes.get(attr.FAMILY, "") if parent else ""
        return _Target(vdev, f"/dev/vdavinci{vdev}", f"/dev/davinci{vdev}", True, family)
    card = cards.get(hardware_id)
    if card is None:
        raise ValueError(f"unknown Ascend device {hardware_id!r}")
    phy = int(card.attributes.get(attr.PHY_ID, card.index))
    return _Target(
        phy, f"/dev/davinci{phy}", f"/dev/davinci{phy}", False, card.attributes.get(attr.FAMILY, "")
    )


def container_edits(
    units: Sequence[Unit],
    cards: Mapping[str, Card],
    partitions: Mapping[str, Partition],
    host: HostFacts,
    options: EditOptions,
) -> ContainerEdits:
    """Env, device nodes and mounts for ``units``; replicas of one chip or vNPU count once."""
    hardware = list(dict.fromkeys(u.hardware_id for u in units))
    targets = sorted((_target(h, cards, partitions) for h in hardware), key=lambda t: t.visible_id)
    if not targets:
        return ContainerEdits()
    kinds = {t.virtual for t in targets}
    if len(kinds) > 1:
        raise ValueError("one container cannot get whole chips and vNPUs together (ASCEND_VISIBLE_DEVICES)")
    virtual = kinds == {True}
    env = {
        VISIBLE_DEVICES: ",".join(str(t.visible_id) for t in targets),
        RT_VISIBLE_DEVICES: ",".join(str(i) for i in range(len(targets))),
        RUNTIME_OPTIONS: VIRTUAL if virtual else "",
    }
    if any(t.family == "Ascend310B" for t in targets):
        env[ALLOW_LINK] = "True"
    if options.use_ascend_docker:
        return ContainerEdits(env=env)
    nodes = [DeviceNode(container_path=t.container_path, host_path=t.host_path) for t in targets]
    nodes += [DeviceNode(container_path=c, host_path=h) for h, c in host.control_devices]
    mounts = [Mount(container_path=path, host_path=path, read_only=True) for path in host.driver_mounts]
    return ContainerEdits(env=env, devices=tuple(nodes), mounts=tuple(mounts))
