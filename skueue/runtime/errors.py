"""The runtime's own errors (bad input from the other side is :mod:`skueue.wire.errors`)."""

from __future__ import annotations


class DaemonError(Exception):
    """The daemon cannot start (port in use, peers unreachable); one line for the user."""
