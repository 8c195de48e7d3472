"""Bearer tokens: a fixed one from a kubeconfig, or a file that is read again whenever it changes.

A pod's service-account token is a bound token that kubelet rotates (hourly by default, valid a
little longer): a daemon that read it once at start-up would be refused with 401 after the old one
expires. kubelet replaces the projected volume's files by swapping a symlink, so the file's identity
(device, inode), size or modification time changes; :class:`TokenFile` looks at ``os.stat`` before
each request (cheap, no read) and reads the file again only then.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol

__all__ = ["StaticToken", "TokenFile", "TokenSource"]


class TokenSource(Protocol):
    """What the client asks before each request: the token to send ("" sends none)."""

    def token(self) -> str: ...


class StaticToken:
    """A token written in a kubeconfig (or none at all)."""

    def __init__(self, value: str = "") -> None:
        self._value = value.strip()

    def token(self) -> str:
        return self._value


class TokenFile:
    """A token read from ``path``, read again when the file changes.

    If the file cannot be read after a change (mid-rotation, removed), the last token read is sent:
    it may still be valid, and the next request looks again. The first read happens here, so a
    missing or empty file is an error at start-up (``OSError`` / ``ValueError``), not a 401 later.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._value = self._read()
        if not self._value:
            raise ValueError(f"token file {path} is empty")

    def token(self) -> str:
        with self._lock:
            try:
                stamp = self._stat()
            except OSError:
                return self._value
            if stamp != self._stamp:
                try:
                    value = self._read()
                except OSError:
                    return self._value
                if value:
                    self._value = value
                    self._stamp = stamp
            return self._value

    def _stat(self) -> tuple[int, int, int, int]:
        st = os.stat(self._path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _read(self) -> str:
        return self._path.read_text(encoding="utf-8").strip()
