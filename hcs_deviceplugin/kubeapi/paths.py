"""API paths, kept apart from the client so that naming a path loads no networking modules."""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["path_of"]


def path_of(*segments: str) -> str:
    """An API path from its segments, each percent-encoded (a name may hold ``:`` or ``@``)."""
    return "/" + "/".join(quote(segment, safe="") for segment in segments)
