"""Reading one pool file safely: regular files only, never more than the size limit, UTF-8 text out.

Whatever sits at a pool file's path is read by this module alone (the mounted directory and
``validate-config``), because the obvious ``path.read_bytes()`` has three ways to hurt the daemon:
a FIFO blocks it forever, ``/dev/zero`` or a 10 GB file fills its memory, and a device may act on
being opened. So the path is ``stat``-ed first and only a regular file is opened (non-blocking, so a
FIFO swapped in meanwhile cannot block the open), ``fstat`` confirms what was opened, and at most
:data:`~hcs_deviceplugin.pools.limits.MAX_DOCUMENT_BYTES` + 1 bytes are read.

Every problem is a :class:`ReadError` carrying a :class:`ConfigError` that names the path and the
reason; the sources keep the object's last good version then. Only a path where nothing exists at
all (not even a symlink) raises :class:`FileNotFoundError`, which the sources read as "removed".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hcs_deviceplugin.pools.errors import FILE_PATH, ConfigError
from hcs_deviceplugin.pools.limits import MAX_DOCUMENT_BYTES, too_big_message

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_CHUNK = 64 * 1024


class ReadError(Exception):
    """An object that exists but cannot be read (type, size, permissions, not UTF-8)."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


class TooBig(ReadError):
    """A file (or the rest of a ConfigMap directory's budget) over the size limit."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return f"a special file (mode {stat.S_IFMT(mode):o})"


def read_text(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """The UTF-8 text of the regular file at ``path``, of at most ``limit`` bytes.

    Raises :class:`FileNotFoundError` when nothing is at ``path``, :class:`TooBig` over ``limit``
    and :class:`ReadError` for anything else that makes it unreadable.
    """
    content = read_bytes(path, limit)
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(path, f"not UTF-8: {exc.reason} at byte {exc.start}") from exc


def read_bytes(path: Path, limit: int = MAX_DOCUMENT_BYTES, *, regular_only: bool = True) -> bytes:
    """:func:`read_text` without the decoding.

    ``regular_only=False`` is for a path a person named on a command line (``/dev/stdin`` of a
    pipe): anything but a directory is read then, waiting for a writer, still at most ``limit`` + 1
    bytes. The daemon never passes it.
    """
    try:
        before = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise _error(path, f"is a dangling symlink (to {_target(path)!r})") from None
        raise
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from exc
    if regular_only or stat.S_ISDIR(before.st_mode):
        _check_regular(path, before.st_mode)
    flags = os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC | (os.O_NONBLOCK if regular_only else 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from exc
    try:
        opened = os.fstat(fd)
        if regular_only:
            _check_regular(path, opened.st_mode)  # swapped for something else since the stat
        if stat.S_ISREG(opened.st_mode) and opened.st_size > limit:
            raise TooBig(ConfigError(str(path), FILE_PATH, too_big_message(opened.st_size)))
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if size > limit:  # grew since the fstat
        raise TooBig(ConfigError(str(path), FILE_PATH, too_big_message(None)))
    return b"".join(chunks)


def _check_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    via = f" (through a symlink to {_target(path)!r})" if os.path.islink(path) else ""
    raise _error(path, f"not a regular file: it is {kind_of(mode)}{via}")


def _target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _error(path: Path, message: str) -> ReadError:
    return ReadError(ConfigError(str(path), FILE_PATH, message))
