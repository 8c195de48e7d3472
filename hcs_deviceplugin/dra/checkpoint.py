"""Prepared claims on disk, so a daemon restart between Prepare and Unprepare neither leaks a hold
nor prepares a claim twice (kubelet retries Prepare for claims it has not seen answered, and calls
Unprepare for claims prepared by a previous run of the plugin).

One small JSON file under ``--state-dir``, replaced atomically (temp file, fsync, rename, fsync of
the directory). An unreadable file is moved aside, not trusted and not lost: the daemon starts empty
and says so, which kubelet's retries then repair.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "dra-claims.json"
VERSION = 1


@dataclass(frozen=True)
class PreparedDevice:
    """One device prepared for a claim, with what it holds and what the runtime was told."""

    requests: tuple[str, ...]
    pool: str
    device: str
    card_id: str
    unit_id: str
    holder_key: str
    cdi_ids: tuple[str, ...]


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]


def encode(claims: Mapping[str, PreparedClaim]) -> str:
    return json.dumps(
        {"version": VERSION, "claims": {uid: asdict(c) for uid, c in sorted(claims.items())}},
        indent=1,
        sort_keys=True,
    )


def decode(text: str) -> dict[str, PreparedClaim]:
    """ValueError (with the reason) for anything that is not a file we wrote."""
    raw = json.loads(text)
    if not isinstance(raw, dict) or raw.get("version") != VERSION or not isinstance(raw.get("claims"), dict):
        raise ValueError(f"not a version {VERSION} DRA checkpoint")
    claims: dict[str, PreparedClaim] = {}
    for uid, entry in raw["claims"].items():
        try:
            devices = tuple(
                PreparedDevice(
                    requests=tuple(str(r) for r in d["requests"]),
                    pool=str(d["pool"]),
                    device=str(d["device"]),
                    card_id=str(d["card_id"]),
                    unit_id=str(d["unit_id"]),
                    holder_key=str(d["holder_key"]),
                    cdi_ids=tuple(str(i) for i in d["cdi_ids"]),
                )
                for d in entry["devices"]
            )
            claims[str(uid)] = PreparedClaim(str(entry["namespace"]), str(entry["name"]), devices)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"claim {uid}: missing or mistyped {exc}") from exc
    return claims


class ClaimCheckpoint:
    """Load once at start; ``save`` after every change, before kubelet gets the answer."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def load(self) -> dict[str, PreparedClaim]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        try:
            return decode(text)
        except ValueError as exc:
            aside = self.path.with_suffix(".corrupt")
            os.replace(self.path, aside)
            log.error("DRA checkpoint %s unreadable (%s): moved to %s, starting empty", self.path, exc, aside)
            return {}

    def save(self, claims: Mapping[str, PreparedClaim]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{FILE_NAME}.tmp")
        with open(tmp, "w") as out:
            out.write(encode(claims))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
