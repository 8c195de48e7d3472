"""Regular expressions compiled on first use instead of at import.

A module-level ``re.compile`` costs 50 to 500 µs on every start of the daemon, also for a pattern
that run never uses (a PCI address in a pool, a DRA driver name, a label value to clean). A
:class:`LazyPattern` holds the source and compiles it the first time it matches; two threads that
race to compile it build equal patterns, and either one is kept.
"""

from __future__ import annotations

import re


class LazyPattern:
    """``re.compile(source, flags)``, deferred to the first ``match``, ``fullmatch`` or ``sub``."""

    __slots__ = ("_compiled", "flags", "source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now if it has not been)."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.source, self.flags)
        return compiled

    @property
    def is_compiled(self) -> bool:
        return self._compiled is not None

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled.match(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.compiled.fullmatch(text)

    def sub(self, replacement: str, text: str) -> str:
        return self.compiled.sub(replacement, text)

    def __repr__(self) -> str:
        return f"LazyPattern({self.source!r})"
