"""What the client raises, by what the caller can do about it, and the error for each
error reply of the daemon."""

from __future__ import annotations

import ssl

from skueue.host.replies import ErrorReply


class SkueueError(Exception):
    """Base of every error the client raises."""


class NodeUnreachable(SkueueError):
    """The daemon could not be reached or the connection broke."""


class NodeUnavailable(SkueueError):
    """The daemon is up but cannot serve now (it is leaving, or a member is down).

    Retryable: nothing was done for the request, so the same request may be sent again,
    to this daemon later or to another member now.
    """


class ProcessMoved(NodeUnavailable):
    """The client's session belongs to a process that another member serves now (after a
    failover): ``address`` says where.  The client follows it by itself."""

    def __init__(self, message: str, address: str) -> None:
        super().__init__(message)
        self.address = address


class RequestRejected(SkueueError):
    """The daemon (or the client, checking the daemon's limits) refused a request:
    a bad value or argument, or one over a limit.  Retrying the same request fails again."""


class RequestTimeout(SkueueError):
    """No reply within the request timeout.  The outcome is unknown: an enqueue may still
    take effect, and a dequeue may have removed an element that is now lost."""


class BadAddress(SkueueError, ValueError):
    """The address is not ``HOST:PORT``."""


def reason(e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return "timed out"
    cause = e.__cause__
    if isinstance(cause, ssl.SSLError):  # anyio wraps a failed TLS read
        e = cause
    if isinstance(e, ssl.SSLError):
        return f"TLS: {e.reason or e}" + TLS_HINTS.get(e.reason or "", "")
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


# What a TLS failure most likely means, said with it.
TLS_HINTS = {
    "WRONG_VERSION_NUMBER": " (the daemon does not speak TLS? it needs --tls-cert)",
    "CERTIFICATE_VERIFY_FAILED": (
        " (the daemon's certificate is not signed by the CA you trust: --tls-ca, "
        "$SKUEUE_TLS_CA; or it does not name the address you dial)"
    ),
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": (
        " (the daemon wants a client certificate: --tls-cert/--tls-key, $SKUEUE_TLS_CERT)"
    ),
    "TLSV1_ALERT_UNKNOWN_CA": " (the daemon does not trust your client certificate's CA)",
}


def error_from(reply: ErrorReply, name: str) -> SkueueError:
    """The client error for an error reply."""
    message, code = " ".join(reply.message.split()) or "no reason given", reply.code
    if code == "timeout":
        return RequestTimeout(f"{name}: {message}; the outcome is unknown")
    if code == "unavailable":
        return NodeUnavailable(f"{name}: {message} (retryable)")
    if code == "moved":
        return ProcessMoved(f"{name}: the process is served at {message} now", message)
    return RequestRejected(message)
