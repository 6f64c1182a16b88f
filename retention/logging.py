"""One JSON object per log line, for log pipelines (``RETENTION_LOG_FORMAT=json``).

The engine passes its identifiers (run, tenant, record, data class) and a
page's or run's counts as ``extra=``; they become fields, so a log search can
follow one run or one record. Only those named fields are copied from a
record: whatever else a library attaches (a request object, say) stays out,
so nothing reaches the log that the message itself does not say.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

CONTEXT_FIELDS = (
    "run_id",
    "tenant_id",
    "record_id",
    "data_class",
    "data_classes",
    "mode",
    "status",
    "counts",
)


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", <context fields>, "exception"}``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # json.dumps escapes newlines, so a traceback stays on one line.
        return json.dumps(entry, default=str, ensure_ascii=False)
