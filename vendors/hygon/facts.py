"""What the backend keeps of each card between discovery and the next: where it is and its minors.

Health checks compare the hardware now against these, and Allocate builds device nodes from them, so
neither needs to read sysfs to know which files belong to which card.
"""

from __future__ import annotations

from dataclasses import dataclass

from vendors.hygon.drm import DrmMinors


@dataclass(frozen=True)
class CardFacts:
    """One card's PCI address, device id and DRM minors as discovery saw them."""

    card_id: str
    address: str
    device_id: int
    minors: DrmMinors
