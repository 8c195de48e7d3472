"""Memory sizes as Kubernetes writes them (``2Gi``, ``1536Mi``, ``8G``, ``1073741824``), in bytes.

``memoryPerReplica`` is written the way a pod's ``resources`` are (the seeds ask for ``gpu-share: 2Gi``),
so it reads Kubernetes' binary (``Ki`` … ``Ei``) and decimal (``k``, ``M`` … ``E``) suffixes on a whole
number. Fractions and exponents, which a quantity allows, are refused: a share of card memory is a
whole number of bytes, and ``1.5Gi`` is clearer as ``1536Mi``.
"""

from __future__ import annotations

from hcs_deviceplugin.lazyre import LazyPattern

_SUFFIXES = {
    "": 1,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY = LazyPattern(r"(?P<number>[0-9]{1,20})(?P<suffix>[KMGTPE]i|[kMGTPE])?")


def parse_bytes(text: str) -> int | None:
    """``text`` in bytes, or ``None`` when it is not a whole-number memory quantity."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        return None
    return int(match["number"]) * _SUFFIXES[match["suffix"] or ""]
