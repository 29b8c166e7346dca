"""structlog set-up for the daemon: JSON lines (for machines and ``skueue analyze``) or
console (for people)."""

from __future__ import annotations

import logging
import sys

import attrs
import structlog

from skueue.host.inputs import PeerMessage


@attrs.define
class DebugLogs:
    """Whether debug events are on: a hot path checks this before it computes what a
    debug event would say (a filtered logger still evaluates its arguments)."""

    enabled: bool = False


DEBUG_LOGS = DebugLogs()


@attrs.define
class LogFormat:
    """The format the daemon logs in, for the few lines it writes outside structlog's
    loggers (a signal, an exit): in JSON mode they must be JSON events too, or a reader
    of the log (``skueue analyze``) finds lines it cannot parse."""

    json: bool = False


LOG_FORMAT = LogFormat()


def configure(log_format: str = "console", level: str = "info") -> None:
    DEBUG_LOGS.enabled = level.lower() == "debug"
    LOG_FORMAT.json = log_format == "json"
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def describe_input(item: object) -> str:
    """One line for the log: the input's kind and, for a peer message, its describe()."""
    if isinstance(item, PeerMessage):
        return f"from {item.peer}: {item.message.describe()}"
    return repr(item)[:300]
