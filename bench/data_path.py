"""What one request costs a server, per design of its data path: trio tasks, trio with a
reactor of its own, asyncio and uvloop Protocols.

    .venv/bin/python bench/data_path.py [--requests 20000] [--clients 16] [--in-flight 8]
        [--designs trio-tasks trio-reactor asyncio-protocol uvloop-protocol] [--pin CPU]

Issue 30 asks for the daemon's data path to cost about what its event loop costs at its
best.  bench/event_loops.py measured the loops under anyio's streams; this measures each
design at its best.  Every micro-server does the same work per read (:func:`answer`):
decode length-prefixed msgpack frames, answer each ``[id, payload]`` with ``[id,
payload]`` packed, one write for them all:

- ``trio-tasks``: a task per connection, ``receive_some`` → answer → ``send_all``;
- ``trio-reactor``: the daemon's (skueue/runtime/network/reactor.py): ONE trio task keeps
  an epoll set of its own with every socket, waits for it with ``wait_readable``,
  ``poll(0)``s it, reads each ready socket once (``recv(64 KiB, MSG_DONTWAIT)``) and
  answers with ``send(MSG_DONTWAIT)``, waiting for EPOLLOUT only when a socket is full;
- ``asyncio-protocol``: ``data_received`` → answer → ``transport.write``;
- ``uvloop-protocol``: the same under uvloop, where it is installed.

The server is a separate process (``--serve DESIGN``), pinned to one core with ``--pin
CPU`` where the machine has more than 2 (the clients keep the others).  The figure is its
CPU (user + system from ``/proc/<pid>/stat``, 10 ms ticks) over the measured phase per
request.  The clients, the same for every design, are lean asyncio Protocols in this
process (on uvloop where installed): ``--clients`` connections share the ``--requests``
with 1 request outstanding each, then ``--in-flight``; every reply must carry its
request's id and payload.  An unmeasured warm-up precedes each scenario, each bounded by
``--timeout``.  Prints a Markdown table (ratios against asyncio-protocol) and writes
bench/results/data_path.json.  Every server is killed at the end, also on an error or
Ctrl-C (exit 130) and when this process dies.  Loopback only, port 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import json
import os
import platform
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # (run as a script or loaded by the tests)

import event_loops  # noqa: E402
from bench_support import command_line, cpu_seconds, package_version, pin  # noqa: E402
from event_loops import LoadResult, make_payload, reply_to  # noqa: E402

from skueue.wire.framing import FrameDecoder, pack  # noqa: E402

DESIGNS = ("trio-tasks", "trio-reactor", "asyncio-protocol", "uvloop-protocol")
HOST = "127.0.0.1"
RECEIVE_BYTES, EVENTS_PER_WAKE_MAX = 65536, 1024  # the daemon's (network/connections, reactor)
SEND_FLAGS = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL
SERVER_START_S = 20.0
# For asyncio.Runner: uvloop's loop where installed (None: asyncio's own).
UVLOOP = (importlib.import_module("uvloop").new_event_loop
          if event_loops.uvloop_available() else None)


def answer(decoder: FrameDecoder, data: bytes) -> bytes:
    """Every design's work for one read: its frames' replies, packed, as one buffer."""
    replies = [pack(reply_to(request)) for request in decoder.feed(data)]
    return replies[0] if len(replies) == 1 else b"".join(replies)


async def serve_trio_tasks(listener: socket.socket) -> None:
    async def connection(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                while data := await stream.receive_some(RECEIVE_BYTES):
                    if out := answer(decoder, data):
                        await stream.send_all(out)

    sockets = [trio.SocketListener(trio.socket.from_stdlib_socket(listener))]
    await trio.serve_listeners(connection, sockets)


class ReactorConnection:
    """One socket the reactor reads; ``unsent``: replies the kernel had no room for."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.decoder, self.unsent = sock, FrameDecoder(), bytearray()

    def on_readable(self) -> bool:
        """Read once and answer; False when the client has closed."""
        try:
            data = self.sock.recv(RECEIVE_BYTES, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        if data and (out := answer(self.decoder, data)):
            sent = 0
            if not self.unsent:  # (replies behind unsent ones wait their turn)
                with contextlib.suppress(BlockingIOError):
                    sent = self.sock.send(out, SEND_FLAGS)
            if sent < len(out):
                self.unsent += memoryview(out)[sent:]
        return bool(data)


async def serve_trio_reactor(listener: socket.socket) -> None:
    epoll, lfd = select.epoll(), listener.fileno()
    listener.setblocking(False)
    epoll.register(lfd, select.EPOLLIN)
    connections: dict[int, ReactorConnection] = {}
    while True:
        await trio.lowlevel.wait_readable(epoll.fileno())
        for fd, events in epoll.poll(0, EVENTS_PER_WAKE_MAX):
            if fd == lfd:
                with contextlib.suppress(BlockingIOError):
                    while True:
                        sock, _ = listener.accept()
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        connections[sock.fileno()] = ReactorConnection(sock)
                        epoll.register(sock.fileno(), select.EPOLLIN)
                continue
            conn = connections[fd]
            was_full = bool(conn.unsent)
            try:
                if events & select.EPOLLOUT:  # room again for what waited
                    with contextlib.suppress(BlockingIOError):
                        del conn.unsent[: conn.sock.send(conn.unsent, SEND_FLAGS)]
                open_ = conn.on_readable() if events & ~select.EPOLLOUT else True
            except OSError:
                open_ = False
            if not open_:
                epoll.unregister(fd)  # before close: the number is reused
                del connections[fd]
                conn.sock.close()
            elif bool(conn.unsent) != was_full:
                epoll.modify(fd, select.EPOLLIN | (select.EPOLLOUT if conn.unsent else 0))


class ReplyProtocol(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is no subclass)
        self.decoder = FrameDecoder()

    def data_received(self, data: bytes) -> None:
        if out := answer(self.decoder, data):
            self.transport.write(out)


async def serve_protocol(listener: socket.socket) -> None:
    server = await asyncio.get_running_loop().create_server(ReplyProtocol, sock=listener)
    await server.serve_forever()


def serve(design: str) -> None:
    """The micro-server: prints its port on stdout, then serves until killed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches us too: the parent stops us
    listener = socket.create_server((HOST, 0))
    print(listener.getsockname()[1], flush=True)
    if design.startswith("trio-"):
        trio.run(serve_trio_tasks if design == "trio-tasks" else serve_trio_reactor, listener)
    else:
        with asyncio.Runner(loop_factory=UVLOOP if design == "uvloop-protocol" else None) as runner:
            runner.run(serve_protocol(listener))


@contextlib.contextmanager
def server_process(design: str, cpu: int | None = None) -> Iterator[tuple[int, int]]:
    """A server of ``design`` (pinned to ``cpu`` if given): its pid and port; killed and
    reaped at the end, whatever happens."""
    command = [sys.executable, str(Path(__file__).resolve()), "--serve", design]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            preexec_fn=event_loops._die_with_parent)  # (dies with us)
    assert proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], SERVER_START_S)
        line = proc.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            raise RuntimeError(f"the {design} server did not start (said {line!r})")
        if cpu is not None:
            pin(proc.pid, {cpu})
        yield proc.pid, int(line)
    finally:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        proc.stdout.close()


class LoadClient(asyncio.Protocol):
    """One connection sending its ``share`` of requests, ``in_flight`` outstanding."""

    def __init__(
        self, client: int, share: int, in_flight: int, payload_bytes: int, out: LoadResult,
        done: asyncio.Future[None],
    ) -> None:  # fmt: skip
        self.client, self.share, self.in_flight = client, share, in_flight
        self.payload_bytes, self.out, self.done = payload_bytes, out, done
        self.decoder = FrameDecoder()
        self.pending: dict[int, tuple[bytes, float]] = {}
        self.next_seq = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.send(min(self.in_flight, self.share))

    def send(self, count: int) -> None:
        now, frames = time.perf_counter(), []
        for seq in range(self.next_seq, self.next_seq + count):
            payload = make_payload(self.client, seq, self.payload_bytes)
            self.pending[seq] = (payload, now)
            frames.append(pack([seq, payload]))
        self.next_seq += count
        self.out.sent += count
        self.transport.write(b"".join(frames))

    def data_received(self, data: bytes) -> None:
        now, answered, out = time.perf_counter(), 0, self.out
        for reply in self.decoder.feed(data):
            rid, payload = reply if isinstance(reply, list) and len(reply) == 2 else (None, None)
            sent = self.pending.pop(rid, None) if isinstance(rid, int) else None
            if sent is None or sent[0] != payload:
                out.wrong += 1
                continue
            out.ok += 1
            answered += 1
            out.latencies_s.append(now - sent[1])
        if (more := min(answered, self.share - self.next_seq)) > 0:
            self.send(more)
        elif not self.pending and self.next_seq == self.share and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"the server closed client {self.client}"))


async def client_load(
    port: int, clients: int, requests: int, in_flight: int, payload_bytes: int,
    timeout_s: float,
) -> LoadResult:  # fmt: skip
    """The load of one scenario; a reply missing at ``timeout_s`` ends it (timed_out)."""
    loop, out = asyncio.get_running_loop(), LoadResult()
    shares = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]
    transports: list[asyncio.BaseTransport] = []
    start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            dones = []
            for i, share in enumerate(shares[: min(clients, requests)]):
                dones.append(loop.create_future())
                make = functools.partial(LoadClient, i, share, in_flight, payload_bytes,
                                         out, dones[-1])
                transports.append((await loop.create_connection(make, HOST, port))[0])
            await asyncio.gather(*dones)
    except TimeoutError:
        out.timed_out = True
    except OSError as e:  # (the replies missing say so too)
        print(f"load: {e}", file=sys.stderr)
    finally:
        out.seconds = time.perf_counter() - start
        for transport in transports:
            transport.close()
        await asyncio.sleep(0)  # let the transports close
    return out


def run_clients(*args: Any) -> LoadResult:
    """:func:`client_load` on uvloop where installed, asyncio otherwise."""
    with asyncio.Runner(loop_factory=UVLOOP) as runner:
        return runner.run(client_load(*args))


def measure(
    design: str, *, requests: int, clients: int, in_flights: list[int],
    payload_bytes: int = 100, timeout_s: float = 60.0, warmup_requests: int = 1000,
    cpu: int | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One server of ``design``, one row per in-flight count (with the server's pid)."""
    rows = []
    with server_process(design, cpu) as (pid, port):
        for in_flight in in_flights:
            if warmup_requests:
                run_clients(port, clients, warmup_requests, in_flight, payload_bytes, timeout_s)
            cpu0, client0 = cpu_seconds([pid]), time.process_time()
            load = run_clients(port, clients, requests, in_flight, payload_bytes, timeout_s)
            client_s, server_s = time.process_time() - client0, cpu_seconds([pid]) - cpu0
            rows.append({
                "design": design, "in_flight": in_flight, "clients": clients,
                "requests": requests, "payload_bytes": payload_bytes, "sent": load.sent,
                "ok": load.ok, "wrong": load.wrong, "timed_out": load.timed_out,
                "seconds": load.seconds,
                "requests_per_s": load.ok / load.seconds if load.seconds else 0.0,
                "server_cpu_us_per_request": server_s / max(1, load.ok) * 1e6,
                # the share of one core the server was busy: near 1, it is the bottleneck
                "server_busy": server_s / load.seconds if load.seconds else 0.0,
                "client_cpu_us_per_request": client_s / max(1, load.ok) * 1e6, "server_pid": pid})
    return rows


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Against asyncio-protocol in the same scenario (CPU: >1 costs more; req/s: >1 is
    faster)."""
    base = {r["in_flight"]: r for r in rows if r["design"] == "asyncio-protocol" and "ok" in r}
    pairs = (("server_cpu_us_per_request", "cpu_vs_asyncio"), ("requests_per_s", "rps_vs_asyncio"))
    for row in rows:
        b = base.get(row["in_flight"]) if "ok" in row else None
        for key, ratio in pairs:
            row[ratio] = row[key] / b[key] if b and b[key] else None


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| design | scenario | server CPU µs/request | requests/s | server busy "
             "| CPU vs asyncio-protocol | req/s vs asyncio-protocol |", "|---" * 7 + "|"]
    for r in rows:
        head = f"| {r['design']} | {r['in_flight']} in flight / client |"
        if "ok" not in r:
            lines.append(f"{head} {r['note']} | | | | |")
            continue
        ratios = " | ".join("—" if x is None else f"{x:.2f}×"
                            for x in (r["cpu_vs_asyncio"], r["rps_vs_asyncio"]))
        lines.append(f"{head} {r['server_cpu_us_per_request']:.1f} | {r['requests_per_s']:,.0f}"
                     f" | {r['server_busy']:.0%} | {ratios} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20000, help="requests per scenario")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--in-flight", type=int, default=8,
                   help="outstanding requests per client in the second scenario")
    p.add_argument("--designs", nargs="+", choices=DESIGNS, default=DESIGNS)
    p.add_argument("--payload", type=int, default=100, help="payload bytes per request")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per scenario")
    p.add_argument("--pin", type=int, metavar="CPU", help="the server's core (> 2 cores)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "data_path.json")
    p.add_argument("--serve", choices=DESIGNS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    for name in ("requests", "clients", "in_flight", "payload", "timeout"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be more than 0")
    cores = sorted(os.sched_getaffinity(0))
    if args.pin is not None and args.pin not in cores:
        p.error(f"--pin {args.pin}: not one of this process's cores {cores}")
    cpu = args.pin if len(cores) > 2 else None  # (on 2, the server and the clients share them)
    if cpu is not None:
        os.sched_setaffinity(0, set(cores) - {cpu})  # the clients: every other core
    in_flights = sorted({1, args.in_flight})
    rows: list[dict[str, Any]] = []
    try:
        for design in args.designs:
            if design == "uvloop-protocol" and UVLOOP is None:
                rows += [{"design": design, "in_flight": n, "note": "not installed"}
                         for n in in_flights]
                continue
            print(f"server: {design} ...", file=sys.stderr, flush=True)
            rows += measure(design, requests=args.requests, clients=args.clients,
                            in_flights=in_flights, payload_bytes=args.payload,
                            timeout_s=args.timeout, cpu=cpu)
    except KeyboardInterrupt:
        return 130
    add_ratios(rows)
    own = {str(k): event_loops.python_only_us(k, payload_bytes=args.payload) for k in in_flights}
    client_loop = "uvloop" if UVLOOP else "asyncio"
    where = f"server pinned to CPU {cpu}" if cpu is not None else f"unpinned, {len(cores)} cores"
    print(f"\nclients: {args.clients} asyncio Protocols on {client_loop} in one process; "
          f"{args.requests} requests of {args.payload} bytes per scenario; {where}; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}\n")
    print(table(rows))
    print("\nthe work itself per request (decode, reply, pack, join; no loop, no socket): "
          + ", ".join(f"{v:.1f} µs at {k} per read" for k, v in own.items()))
    short = [r for r in rows if "ok" in r and (r["ok"] != r["requests"] or r["wrong"])]
    for r in short:
        print(f"WARNING: {r['design']}, {r['in_flight']} in flight: {r['ok']} of {r['requests']}"
              f" right, {r['wrong']} wrong, timed out: {r['timed_out']}", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    versions = {n: package_version(n) for n in ("trio", "uvloop", "msgpack")}
    args.out.write_text(json.dumps({
        "command": command_line(), "client_loop": client_loop, "pinned_cpu": cpu,
        "cpus": os.cpu_count(), "platform": platform.platform(), "versions": versions,
        "work_only_us_per_request": own, "results": rows}, indent=2) + "\n")
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
