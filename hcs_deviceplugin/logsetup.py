"""Log output as text for people or as one JSON object per line for log pipelines.

JSON lines come from python-json-logger, which keeps every ``extra=`` field of a record as a key of
its own (``config_source``, ``config_path``, ``pool``, ``card`` …) and turns values JSON cannot hold
(paths, enums) into strings, so a pipeline can filter on them without parsing the message. The
fixed keys come first: ``time`` (UTC, milliseconds), ``level`` (lower case), ``logger``, ``message``;
then ``exception`` when there is one, and the extras.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""The level names ``--log-level`` takes (any case)."""


def utc_time(record: logging.LogRecord) -> str:
    """``2026-11-26T08:40:20.123Z``: the record's creation time in UTC with milliseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class JsonFormatter(_LibraryJsonFormatter):
    """One JSON object per record: time, level, logger, message, every ``extra=`` field, exception."""

    def __init__(self) -> None:
        super().__init__(
            "%(message)s",
            rename_fields={"exc_info": "exception", "stack_info": "stack"},
            json_ensure_ascii=False,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = utc_time(record)
        log_data["level"] = record.levelname.lower()
        log_data["logger"] = record.name
        super().add_fields(log_data, record, message_dict)


def configure_logging(fmt: str = "text", level: str = "info", stream: object = None) -> None:
    """Install one handler on the root logger in the chosen format."""
    handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
