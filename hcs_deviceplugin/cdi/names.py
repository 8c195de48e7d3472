"""What a unit is called in our CDI specs: ``hcs.deckhouse.io/<class>=<device name>``.

Pure and stateless on purpose: Allocate computes the names of the units it hands out from the units
alone (no I/O, no lookup in the written files), and the publisher computes the same names when it
writes the spec, so the two cannot disagree.

* The kind is ``hcs.deckhouse.io/<class>``; a backend names its class with an optional ``cdi_class``
  attribute (``gpu``, ``npu``, ``dcu``, ``mlu``), otherwise the class is the backend's name.
* A device is named after the card or partition a unit stands for, so every time-slice replica of a
  card resolves to the one entry of that card. CDI allows letters, digits and ``_ . : -`` with a
  letter or digit at both ends; an id that is already such a name is used as it is (UUIDs, PCI
  addresses), any other is cleaned and given a short hash of the original, so two ids never share a
  name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from hcs_deviceplugin.lazyre import LazyPattern
from hcs_deviceplugin.model import Unit

if TYPE_CHECKING:
    from hcs_deviceplugin.backend import Backend

VENDOR_DOMAIN = "hcs.deckhouse.io"
SPEC_FILE_PREFIX = "hcs-deviceplugin-"
"""Every spec file we own starts with this; no other file in the CDI directory is ever touched."""

_DEVICE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_CLASS_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")
_NOT_NAME = LazyPattern(r"[^A-Za-z0-9_.:-]+")
_EDGES = LazyPattern(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def is_device_name(name: str) -> bool:
    return _DEVICE_NAME.fullmatch(name) is not None


def device_name(hardware_id: str) -> str:
    """The CDI device name of a card or partition id (see the module docstring)."""
    if is_device_name(hardware_id):
        return hardware_id
    import hashlib  # here: loading OpenSSL costs a start ~2.5 ms, and most ids are names already

    digest = hashlib.sha256(hardware_id.encode()).hexdigest()[:8]
    cleaned = _EDGES.sub("", _NOT_NAME.sub("-", hardware_id))
    return f"{cleaned}-{digest}" if cleaned else f"id-{digest}"


def cdi_kind(device_class: str) -> str:
    """``hcs.deckhouse.io/<class>``; ValueError if the class is not a CDI kind name segment."""
    if _CLASS_NAME.fullmatch(device_class) is None:
        raise ValueError(
            f"CDI device class {device_class!r} is not a valid kind name (letters, digits, _ . -)"
        )
    return f"{VENDOR_DOMAIN}/{device_class}"


def backend_kinds(classes: Mapping[str, str]) -> dict[str, str]:
    """backend name → kind; two backends asking for one class get their own names instead.

    Two spec files of one kind are legal, but two backends naming devices independently could then
    produce one qualified name twice, which a runtime refuses for both.
    """
    kinds: dict[str, str] = {}
    claimed: dict[str, str] = {}
    for backend in sorted(classes):
        wanted = classes[backend]
        if wanted in claimed:
            wanted = backend
        claimed[wanted] = backend
        kinds[backend] = cdi_kind(wanted)
    return kinds


def device_class(backend: Backend) -> str:
    """The class a backend asks for (optional attribute ``cdi_class``), else its name."""
    wanted = getattr(backend, "cdi_class", None)
    return wanted if isinstance(wanted, str) and wanted else backend.name


def kinds_of(backends: Mapping[str, Backend]) -> dict[str, str]:
    """backend name → kind, from each backend's class (see :func:`backend_kinds`)."""
    return backend_kinds({name: device_class(b) for name, b in backends.items()})


def qualified_name(kind: str, name: str) -> str:
    return f"{kind}={name}"


def unit_names(units: Iterable[Unit], kinds: Mapping[str, str]) -> tuple[str, ...]:
    """The qualified CDI names of ``units``, one per card or partition, in first-seen order.

    KeyError for a unit of a backend without a kind (a caller's bug: every running backend has one).
    """
    names = (qualified_name(kinds[u.backend], device_name(u.hardware_id)) for u in units)
    return tuple(dict.fromkeys(names))


def spec_file_name(backend: str) -> str:
    """``hcs-deviceplugin-<backend>.json``: one file per backend (vendor)."""
    return f"{SPEC_FILE_PREFIX}{backend}.json"
