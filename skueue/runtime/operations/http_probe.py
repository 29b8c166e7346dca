"""A small HTTP server on trio for the metrics and health endpoints (``--metrics ADDR``).

It runs in the daemon's own trio thread, so the handler reads the daemon's state between
two owner steps, as every other task does: no lock, no thread.  One request per
connection (``Connection: close``), GET and HEAD only; that is all Prometheus, a load
balancer's probe or ``curl`` need.

Bad HTTP never hurts the daemon.  Every limit is in
:class:`~skueue.runtime.limits.Limits`:

- ``http_connections_max`` connections are served at once; one more gets ``503`` at once
  and is closed;
- a request's head (request line and headers) may hold ``http_request_bytes_max`` bytes;
  a longer one gets ``431``;
- a connection has ``http_request_timeout_s`` from accept to the end of its response
  (a client that sends nothing, or reads nothing, is dropped then);
- a request line that is not ``METHOD TARGET HTTP/1.x`` gets ``400``, another method
  ``405``, another path ``404``.

A handler that raises (our bug) is logged and answered with ``500``; the daemon serves on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import attrs
import structlog
import trio

from skueue.runtime.limits import Limits

log = structlog.get_logger("skueued")

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
TEXT = "text/plain; charset=utf-8"
# After answering, what a client still sends is read and dropped for at most this long
# and this much (a lingering close; the request timeout bounds it too).
LINGER_S = 1.0
LINGER_BYTES_MAX = 64 * 1024


@attrs.frozen
class Response:
    status: int
    body: bytes
    content_type: str = TEXT


Handler = Callable[[str], Response]
"""Answers a GET of a path (the query string cut off)."""


class HttpProbe:
    def __init__(self, routes: dict[str, Handler], limits: Limits) -> None:
        self.routes = routes
        self.limits = limits
        self.active = 0

    async def serve(self, listeners: list[trio.SocketListener]) -> None:
        await trio.serve_listeners(self.connection, listeners)

    async def connection(self, stream: trio.SocketStream) -> None:
        limits = self.limits
        try:
            with trio.move_on_after(limits.http_request_timeout_s):
                if self.active >= limits.http_connections_max:
                    await read_head(stream, limits.http_request_bytes_max)
                    await self._send(stream, "GET", text(503, "busy: too many connections\n"))
                    await linger(stream)
                    return
                self.active += 1
                try:
                    method, response = await self._answer(stream)
                    await self._send(stream, method, response)
                finally:
                    self.active -= 1  # lingering (bounded by LINGER_S) is not serving
                await linger(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client went away; nothing to tell anyone
        finally:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await trio.aclose_forcefully(stream)

    async def _answer(self, stream: trio.SocketStream) -> tuple[str, Response]:
        head = await read_head(stream, self.limits.http_request_bytes_max)
        if head is None:
            return "GET", text(431, "request head too large\n")
        parts = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return "GET", text(400, "expected METHOD TARGET HTTP/1.x\n")
        method = parts[0].decode("ascii", "replace")
        if method not in ("GET", "HEAD"):
            return method, text(405, "only GET and HEAD\n")
        path = parts[1].decode("ascii", "replace").split("?", 1)[0]
        handler = self.routes.get(path)
        if handler is None:
            return method, text(404, f"no {path[:100]} here; try {', '.join(self.routes)}\n")
        try:
            return method, handler(path)
        except Exception:
            log.error("bug: an HTTP handler failed", path=path, exc_info=True)
            return method, text(500, "internal error (see the daemon's log)\n")

    @staticmethod
    async def _send(stream: trio.SocketStream, method: str, response: Response) -> None:
        head = (
            f"HTTP/1.1 {response.status} {REASONS.get(response.status, '')}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("ascii")
        await stream.send_all(head if method == "HEAD" else head + response.body)


async def linger(stream: trio.SocketStream) -> None:
    """Close gently: say we are done, then read what the client still sends for a moment.
    Closing on unread bytes resets the connection, and a reset can reach the client
    before the answer it has not read yet."""
    await stream.send_eof()
    with trio.move_on_after(LINGER_S):
        drained = 0
        while drained < LINGER_BYTES_MAX:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            drained += len(chunk)


def text(status: int, body: str) -> Response:
    return Response(status, body.encode("utf-8"))


async def read_head(stream: trio.SocketStream, bytes_max: int) -> bytes | None:
    """The request's head up to its blank line (None: longer than ``bytes_max``; what
    came if the client stopped sending before the blank line)."""
    data = bytearray()
    while True:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            end = data.find(b"\n\n")
        if end >= 0:
            return bytes(data[:end]) if end <= bytes_max else None
        if len(data) > bytes_max:
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return bytes(data)
        data += chunk
