"""A scriptable fake ``skueued`` on 127.0.0.1 (an OS-chosen port), for client and CLI tests.

It runs in a thread of the test process with plain blocking sockets, so it serves clients
in the same process (trio or asyncio) and CLI subprocesses alike.  It answers the hello
with ``welcome`` (the limits element only when given), then hands every request frame to
``respond(frame)``, which returns the frames to send back (``CLOSE`` hangs up); the
default never answers, the stalled cluster of issue 8.  Every loop is bounded by
``stop()``, which closes everything.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any

from skueue.wire.framing import FrameDecoder, pack

Respond = Callable[[list[Any]], list[Any]]
CLOSE = "close the connection"  # a reply that makes the fake hang up, as a daemon may


def never(frame: list[Any]) -> list[Any]:
    return []


class FakeDaemon:
    def __init__(
        self,
        respond: Respond = never,
        *,
        limits: dict[str, int] | None = None,
        process_id: str = "fake",
        structure: str = "queue",
        greet: bool = True,
    ) -> None:
        self.respond = respond
        self.welcome: list[Any] = ["welcome", process_id, structure, 1]
        if limits is not None:
            self.welcome.append(limits)
        self.greet = greet
        self.hellos: list[Any] = []
        self.requests: list[Any] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepter = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> FakeDaemon:
        self._accepter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._accepter.join(timeout=5)
        with self._lock:
            for c in self._conns:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                c.close()
        for t in self._threads:
            t.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(0.1)
            with self._lock:
                self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        hello_seen = False
        while not self._stop.is_set():
            try:
                data = conn.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            for frame in decoder.feed(data):
                out: list[Any]
                if not hello_seen:
                    hello_seen = True
                    self.hellos.append(frame)
                    out = [self.welcome] if self.greet else []
                else:
                    self.requests.append(frame)
                    out = self.respond(frame)
                try:
                    for reply in out:
                        if reply == CLOSE:
                            conn.shutdown(socket.SHUT_RDWR)
                            return
                        conn.sendall(pack(reply))
                except OSError:
                    return
