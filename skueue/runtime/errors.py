"""The runtime's own errors (bad input from the other side is :mod:`skueue.wire.errors`)."""

from __future__ import annotations


class DaemonError(Exception):
    """The daemon cannot start (port in use, peers unreachable); one line for the user."""


class RefusedForGood(DaemonError):
    """A member refused this daemon on purpose, with a reason that trying again cannot
    change (it is not a member of that cluster, or was removed from it): the daemon
    stops with that reason instead of retrying forever."""
