"""Structured logging: every record carries controller, object and reconcile id.

The ids live in context variables set by the controller around each reconcile,
so any ``logging`` call inside a reconciler (or the client it uses) is tagged
without passing loggers around.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any

CONTROLLER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kubeloop_controller", default=None
)
OBJECT: contextvars.ContextVar[str | None] = contextvars.ContextVar("kubeloop_object", default=None)
RECONCILE_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kubeloop_reconcile_id", default=None
)

_CONTEXT = (("controller", CONTROLLER), ("object", OBJECT), ("reconcile_id", RECONCILE_ID))
_STD_ATTRS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class ContextFilter(logging.Filter):
    """Copies the context variables onto each record (when not set explicitly)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for attr, var in _CONTEXT:
            if not hasattr(record, attr):
                value = var.get()
                if value is not None:
                    setattr(record, attr, value)
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v for k, v in record.__dict__.items() if k not in _STD_ATTRS and not k.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, then context and extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_fields(record))
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """Human-readable: ``time level logger msg key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%H:%M:%S", time.localtime(record.created))
        extras = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"{ts} {record.levelname:<7} {record.name} {record.getMessage()}"
        if extras:
            line += f"  {extras}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: int | str = logging.INFO, *, json_format: bool = False) -> None:
    """Install a stderr handler on the root logger with kubeloop's context fields."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_format else TextFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
