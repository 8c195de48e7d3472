"""How much of a pool document is read at all: size, nesting, nodes, errors — checked before parsing.

A pool document comes from whoever can write a ConfigMap or a file in the pools directory, and the
daemon runs with a small memory limit on every node. Without bounds a few hundred bytes of YAML
aliases expand to gigabytes, a megabyte of nested lists costs half a minute of CPU, and a FIFO or
``/dev/zero`` in place of ``pools.yaml`` is read forever. So every document is held to these bounds
before (or while) it is parsed, and a document beyond them is a config error of its own object: the
object keeps its last good pools, as for any other error.

The bounds are far above what a real pool document needs (one pool per line of a 1,000-node cluster
fits easily) and low enough that refusing the worst document costs milliseconds and megabytes.
"""

from __future__ import annotations

from hcs_deviceplugin.pools.errors import ConfigError, ConfigErrors
from hcs_deviceplugin.pools.objects import ConfigMapObject

MAX_DOCUMENT_BYTES = 1024 * 1024
"""1 MiB: a ConfigMap's own limit (the API server refuses a bigger object). A file, a ConfigMap
directory or an API object whose data is bigger is refused; reading stops at this many bytes + 1."""

MAX_DEPTH = 32
"""Deepest nesting of mappings and lists; a pool document nests five levels, a DKP config six."""

MAX_NODES = 100_000
"""Most YAML nodes (scalars, mappings, lists) or JSON values in one document: 20,000 device entries
with a ``node`` each. Composing that many nodes costs well under a second and some 30 MB."""

MAX_ERRORS_PER_OBJECT = 100
"""Errors reported for one object; the rest are counted in one last error. Enough to fix a document
in one go, without logging 20,000 lines for a generated document that is wrong in every entry."""

MAX_SHOWN_CHARS = 120
"""Longest key or value quoted in an error message; a longer one is cut and its length given."""

DATA_PATH = "data"
"""Field path of errors about an object's data as a whole (its size)."""


def shorten(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` as an error message quotes it: whole when short, else its start and its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def too_big_message(size: int | None) -> str:
    """The one wording of "over the size limit", for files, directories and API objects alike."""
    what = f"this is {size} bytes" if size is not None else "this is bigger"
    return f"too large: at most {MAX_DOCUMENT_BYTES} bytes (1 MiB, a ConfigMap's own limit) are read; {what}"


def oversize(text: str) -> int | None:
    """The UTF-8 size of ``text`` when it is over :data:`MAX_DOCUMENT_BYTES`, else ``None``.

    A character is 1 to 4 bytes, so a text of up to a quarter of the limit is never encoded.
    """
    if 4 * len(text) <= MAX_DOCUMENT_BYTES:
        return None
    size = _encoded_size(text)
    return size if size > MAX_DOCUMENT_BYTES else None


def _encoded_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_object_size(obj: ConfigMapObject) -> None:
    """Raise :class:`ConfigErrors` when ``obj``'s data values together are over 1 MiB.

    The API server enforces about the same limit (on the whole object), so this only refuses what no
    real ConfigMap holds; it runs before any format looks at the object, whichever source delivered
    it. Keys are not counted, so that a mounted file of exactly 1 MiB reads as the same object.
    """
    chars = sum(len(value) for value in obj.data.values())
    if chars <= MAX_DOCUMENT_BYTES // 4:
        return  # even at 4 bytes a character it fits
    size = sum(_encoded_size(value) for value in obj.data.values())
    if size > MAX_DOCUMENT_BYTES:
        raise ConfigErrors([ConfigError(obj.source, DATA_PATH, too_big_message(size))])


def capped(errors: list[ConfigError]) -> list[ConfigError]:
    """``errors`` cut to :data:`MAX_ERRORS_PER_OBJECT`, the rest counted in one last error."""
    if len(errors) <= MAX_ERRORS_PER_OBJECT:
        return errors
    kept = errors[: MAX_ERRORS_PER_OBJECT - 1]
    rest = len(errors) - len(kept)
    last = errors[-1]
    return [*kept, ConfigError(last.source, "<more>", f"{rest} more errors not shown")]
