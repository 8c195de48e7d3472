"""Shaping one pool's Allocate answer for its ``deviceDelivery`` (pure: Allocate does no I/O).

The backend describes what a container needs; the pool says which channel carries the devices. The
environment goes in every mode (see :class:`~hcs_deviceplugin.model.DeviceDelivery`), as do the
backend's own annotations. CDI modes replace device nodes and mounts by names in our spec files.
"""

from __future__ import annotations

from collections.abc import Sequence

from hcs_deviceplugin.lazyre import LazyPattern
from hcs_deviceplugin.model import ContainerEdits, DeviceDelivery

ANNOTATION_PREFIX = "cdi.k8s.io/"
ANNOTATION_PLUGIN = "hcs-deviceplugin"
_MAX_ANNOTATION_NAME = 63
_NOT_KEY = LazyPattern(r"[^A-Za-z0-9_.-]+")


def annotation_key(pool_name: str) -> str:
    """``cdi.k8s.io/hcs-deviceplugin_<pool>``, as CDI's ``AnnotationKey`` builds one per plugin and id.

    A key's name part may have 63 characters; a longer one is cut and ends in a hash of the pool name,
    so pools never share a key (two pools may answer for one container).
    """
    name = f"{ANNOTATION_PLUGIN}_{_NOT_KEY.sub('-', pool_name)}"
    if len(name) > _MAX_ANNOTATION_NAME:
        import hashlib  # here: loading OpenSSL costs a start ~2.5 ms, and most pool names are short

        digest = hashlib.sha256(pool_name.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_ANNOTATION_NAME - 9].rstrip('-_.')}-{digest}"
    return ANNOTATION_PREFIX + name


def deliver(
    edits: ContainerEdits, delivery: DeviceDelivery, cdi_names: Sequence[str], pool_name: str
) -> ContainerEdits:
    """``edits`` as ``delivery`` hands them over; ``cdi_names`` are the units' names in our specs."""
    if delivery is DeviceDelivery.DEVICE_SPECS:
        return edits
    if delivery is DeviceDelivery.ENV:
        return ContainerEdits(env=edits.env, annotations=edits.annotations, cdi_devices=edits.cdi_devices)
    if delivery is DeviceDelivery.CDI_CRI:
        return ContainerEdits(env=edits.env, annotations=edits.annotations, cdi_devices=tuple(cdi_names))
    annotations = dict(edits.annotations)
    if cdi_names:
        annotations[annotation_key(pool_name)] = ",".join(cdi_names)
    return ContainerEdits(env=edits.env, annotations=annotations)
