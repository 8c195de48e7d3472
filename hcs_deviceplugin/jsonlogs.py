"""One JSON object per log line, for log pipelines (``--log-format json``).

JSON lines come from python-json-logger, which keeps every ``extra=`` field of a record as a key of
its own (``config_source``, ``config_path``, ``pool``, ``card`` …) and turns values JSON cannot hold
(paths, enums) into strings, so a pipeline can filter on them without parsing the message. The
fixed keys come first: ``time`` (UTC, milliseconds), ``level`` (lower case), ``logger``, ``message``;
then ``exception`` when there is one, and the extras.

A module of its own so that text logs (the default) never import python-json-logger and what it
pulls in (``json``, ``datetime``, ``uuid``): :mod:`hcs_deviceplugin.logsetup` imports this only for JSON.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter


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
