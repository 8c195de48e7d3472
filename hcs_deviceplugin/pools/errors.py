"""Configuration errors as values.

A pool document can be wrong in many places at once; the user should see every problem in one go, each
pointing at the file (or ConfigMap) and the field, instead of fixing them one restart at a time. So a
single problem is a plain frozen value (:class:`ConfigError`) that sources can compare, keep and report,
and :class:`ConfigErrors` is the one exception that carries all of them out of a parser.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr

DOCUMENT_PATH = "<document>"
"""Field path of errors about the document as a whole (syntax, not a mapping)."""

FILE_PATH = "<file>"
"""Field path of errors about reading a file (permissions, encoding) rather than its content."""


@field_repr
@dataclass(frozen=True, repr=False)
class ConfigError:
    """One problem in one source: ``source`` (file path or object name), ``path`` (``pools[1].unit``).

    A value, not an exception, so that sources can compare the error list of one reload with the
    previous one and notify only on a real change.
    """

    source: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.path}: {self.message}"


class ConfigErrors(Exception):
    """Raised by parsers with every :class:`ConfigError` found, never just the first."""

    def __init__(self, errors: Iterable[ConfigError]) -> None:
        self.errors: list[ConfigError] = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)
