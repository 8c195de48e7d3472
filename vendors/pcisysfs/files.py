"""Reading sysfs/procfs files so that every failure names the file it came from.

A sysfs-driven backend reads dozens of small files per card; a malformed or unreadable one must mark
only that card, and the operator must see which file it was. Every reader here raises
:class:`SysfsFileError` carrying the full path instead of a bare ``OSError`` or ``ValueError``.
"""

from __future__ import annotations

from pathlib import Path


class SysfsFileError(Exception):
    """One file under the host root could not be read or parsed; the message names the path."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_text(path: Path) -> str:
    """The file's content, stripped; :class:`SysfsFileError` if it cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise SysfsFileError(path, "not UTF-8 text") from None
    except OSError as exc:
        raise SysfsFileError(path, exc.strerror or type(exc).__name__) from None


def read_optional_text(path: Path) -> str | None:
    """Like :func:`read_text`, but ``None`` when the file does not exist (an optional attribute)."""
    if not path.exists() and not path.is_symlink():
        return None
    return read_text(path)


def read_int(path: Path, base: int = 0) -> int:
    """The file's content as an integer (``base`` 0 accepts ``0x`` prefixes and decimals)."""
    text = read_text(path)
    try:
        return int(text, base)
    except ValueError:
        raise SysfsFileError(path, f"not an integer: {text[:40]!r}") from None


def parse_key_values(text: str, separator: str) -> dict[str, str]:
    """``Key: value`` (``separator=":"``) or ``key value`` (``separator=" "``) lines as a dict.

    The first occurrence of a repeated key wins; lines without the separator and blank lines are
    skipped; keys and values are stripped.
    """
    result: dict[str, str] = {}
    for line in text.splitlines():
        key, found, value = line.partition(separator)
        key = key.strip()
        if not found or not key or key in result:
            continue
        result[key] = value.strip()
    return result
