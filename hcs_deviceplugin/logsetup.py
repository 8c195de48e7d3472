"""Log output as text for people or as one JSON object per line for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
import time

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""The level names ``--log-level`` takes (any case)."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False)


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
