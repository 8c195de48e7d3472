"""Log output as text for people or as one JSON object per line for log pipelines.

Text is the default and needs nothing beyond :mod:`logging`; the JSON formatter lives in
:mod:`hcs_deviceplugin.jsonlogs` (python-json-logger, its keys and their order) and is imported only
when JSON is asked for.
"""

from __future__ import annotations

import logging
import sys

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""The level names ``--log-level`` takes (any case)."""


def configure_logging(fmt: str = "text", level: str = "info", stream: object = None) -> None:
    """Install one handler on the root logger in the chosen format."""
    handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
    if fmt == "json":
        # Here, not at the top: python-json-logger costs every text-logging start its import.
        from hcs_deviceplugin.jsonlogs import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
