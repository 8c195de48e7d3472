"""What the PCI ids and board names of Cambricon MLUs mean: family, board layout, memory.

The device-id table is the upper 16 bits of the driver's ``MLUID_*`` constants (cambricon.md §1, read
in a public copy of the MLU kernel driver). It names the *family* only; the board name
(``MLU370-X8``) comes from the driver's procfs ``information`` file (``Device name:``), which the
backend prefers, and otherwise only from cndev (``cndevGetCardNameStringByDevId``, library-only).

Memory size is not in any sysfs or procfs file the driver writes (cambricon.md §2.2: it is cndev's
``cndevGetMemoryUsageV2``, library-only). :data:`MEMORY_PER_CHIP` holds the boards for which a
published figure exists; every other board reports 0 ("unknown"), never a guess.
"""

from __future__ import annotations

from types import MappingProxyType

CAMBRICON_VENDOR_ID = 0xCABC
PROCESSING_ACCELERATOR_CLASS = 0x12
"""PCI base class the official plugin requires: ``(class >> 16) & 0xff == 0x12``."""

GIB = 1 << 30

PHYSICAL_FUNCTIONS = MappingProxyType(
    {
        0x0100: "MLU100",
        0x0220: "MLU220",
        0x0228: "MLU220",
        0x0270: "MLU270",
        0x0290: "MLU290",
        0x0370: "MLU370",
        0x0379: "MLU370",
        0x0365: "MLU365",
        0x0590: "MLU590",
        0x0599: "MLU590",
        0x0585: "MLU585",
        0x0580: "MLU580",
        0x0570: "MLU570",
        0x0560: "MLU560",
        0x0320: "CE3226",
        0x0328: "CE3226",
        0x5223: "pigeon",
    }
)
"""PF device id -> family (``0x0379``/``0x0599`` are the MLU370/MLU590 development boards)."""

VIRTUAL_FUNCTIONS = MappingProxyType(
    {
        0x0201: "MLU270",
        0x0271: "MLU270",
        0x0291: "MLU290",
        0x0371: "MLU370",
        0x0366: "MLU365",
        0x0591: "MLU590",
        0x0586: "MLU585",
        0x0581: "MLU580",
        0x0571: "MLU570",
        0x0561: "MLU560",
    }
)
"""SR-IOV VF device id -> family. On the host a VF has a ``physfn`` link and is skipped; inside a VM
the VF is the only function and has none, so it is a card there, as in the official plugin."""

CHIPS_PER_BOARD = MappingProxyType({"MLU370-X8": 2})
"""Boards that carry more than one MLU chip, each its own PCI function, joined by MLU-Link on the
board. MLU370-X8: "two Siyuan 370 chips" (Cambricon's MLU370-X8 launch, March 2022). Functions of such
a board share the ``Board Serial Number`` in ``information``; the official plugin's "board" allocator
keeps them together (cambricon.md §5)."""

MEMORY_PER_CHIP = MappingProxyType(
    {
        "MLU370-X8": 24 * GIB,
        "MLU370-X4": 24 * GIB,
        "MLU370-S4": 24 * GIB,
    }
)
"""Device memory of one chip, by board name. Source: the MLU370-X8 launch (March 2022) gives 48 GB
LPDDR5 for the board's two chips, "twice the memory of the standard Siyuan 370 card" (X4/S4: 24 GB).
Not in cambricon.md; a third-party press figure, so treat it as informative."""


def family_of(device_id: int) -> str | None:
    """The MLU family of a PCI device id, PF or VF; None for an id the driver table does not list."""
    return PHYSICAL_FUNCTIONS.get(device_id) or VIRTUAL_FUNCTIONS.get(device_id)


def is_virtual_function_id(device_id: int) -> bool:
    return device_id in VIRTUAL_FUNCTIONS


def model_name(device_name: str | None, device_id: int) -> str:
    """The board name from ``information`` if the driver knew it, else the family from the id table.

    The driver writes ``mlu-cambricon`` when it does not know the board (cambricon.md §2.2); that is
    no better than the family, so the table wins then. An id the table lacks gives ``MLU-0x<id>``.
    """
    if device_name and device_name != "mlu-cambricon":
        return device_name
    return family_of(device_id) or f"MLU-0x{device_id:04x}"


def chips_per_board(model: str) -> int:
    return CHIPS_PER_BOARD.get(model, 1)


def memory_bytes(model: str) -> int:
    """Memory of one chip of ``model`` from :data:`MEMORY_PER_CHIP`; 0 = unknown (cndev-only)."""
    return MEMORY_PER_CHIP.get(model, 0)
