"""What the event loop costs for the daemon's I/O pattern: trio, asyncio, asyncio + uvloop.

    .venv/bin/python bench/event_loops.py [--requests 20000] [--clients 16] [--in-flight 8]
        [--backends trio,asyncio,asyncio+uvloop]

Issue 10 asks whether another loop would carry ``skueued`` better than trio before anyone
ports the daemon.  This measures the loop alone, on a micro-server written ONCE against
anyio and run on each backend, so the only difference between the runs is the loop under
anyio.  The server mirrors the daemon's data path (skueue/runtime):

- one reader task per connection reads up to 64 KiB at a time, decodes length-prefixed
  msgpack frames with ``skueue.wire.framing.FrameDecoder`` and puts each request into ONE
  shared memory stream, the inbox (``await send``, as ``put`` does);
- one owner task takes what is waiting (receive one, then ``receive_nowait`` the rest, at
  most 4096), packs one reply frame per request (``pack``; the reply carries the request's
  id and its payload back) and offers each to its connection's bounded reply stream with
  ``send_nowait`` (as ``offer`` does);
- one writer task per connection joins the replies waiting into one ``send``.

The server is a separate OS process (this file with ``--serve BACKEND``); its CPU over the
measured load is read from ``/proc/<pid>/stat`` (user + system).  The clients are in this
process, always on ONE backend (asyncio + uvloop where uvloop is installed, asyncio
otherwise) for every server, so that only the server's loop differs between the rows.
Each client sends requests of ``--payload`` bytes and keeps ``--in-flight`` of them
outstanding (1: one at a time); the N requests are shared among the clients, and each
scenario is bounded by ``--timeout``.  Two scenarios per backend: one at a time, and
``--in-flight`` per client.  Before each measurement a short warm-up runs unmeasured.

Also measured, with no loop and no socket: the server's own Python per request (decode,
build the reply, pack, join), so that the rest of the server's CPU can be read as loop and
kernel.  Prints a Markdown table and writes ``bench/results/event_loops.json``.

Every server process is killed at the end, also on an error or Ctrl-C (and, on Linux,
when this process dies: PR_SET_PDEATHSIG).  Loopback only; the server binds port 0.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import json
import os
import platform
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from skueue.wire.framing import FrameDecoder, pack, pack_many  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "event_loops.json"
ALL_BACKENDS = ("trio", "asyncio", "asyncio+uvloop")
HOST = "127.0.0.1"

# The daemon's numbers (skueue/runtime/limits.py, connections.py).
RECEIVE_BYTES = 65536
INBOX_ITEMS_MAX = 1_000_000
INPUTS_PER_STEP_MAX = 4096
CLIENT_REPLIES_MAX = 1024

SERVER_START_S = 20.0


def uvloop_available() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def available_backends() -> list[str]:
    found = ["asyncio"]
    if importlib.util.find_spec("trio") is not None:
        found.insert(0, "trio")
    if uvloop_available():
        found.append("asyncio+uvloop")
    return found


def run_on(backend: str, func: Callable[..., Any], *args: Any) -> Any:
    """``anyio.run`` on one of ALL_BACKENDS."""
    if backend == "trio":
        return anyio.run(func, *args, backend="trio")
    if backend == "asyncio":
        return anyio.run(func, *args, backend="asyncio")
    if backend == "asyncio+uvloop":
        return anyio.run(func, *args, backend="asyncio", backend_options={"use_uvloop": True})
    raise ValueError(f"unknown backend {backend!r}; one of {', '.join(ALL_BACKENDS)}")


# --------------------------------------------------------------------------- server


def reply_to(request: Any) -> Any:
    """The owner's trivial work: the request's id and its payload back."""
    rid, payload = request
    return [rid, payload]


class Connection:
    __slots__ = ("replies",)

    def __init__(self, replies: MemoryObjectSendStream[bytes]) -> None:
        self.replies = replies


Inbox = tuple[Connection, Any]


async def owner(inbox: MemoryObjectReceiveStream[Inbox]) -> None:
    async for first in inbox:
        inputs = [first]
        while len(inputs) < INPUTS_PER_STEP_MAX:
            try:
                inputs.append(inbox.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        for conn, request in inputs:
            try:
                conn.replies.send_nowait(pack(reply_to(request)))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the client is gone
            except anyio.WouldBlock:
                # The daemon closes a client that does not read; here it would be a bug.
                raise RuntimeError("a reply stream is full: the client is not reading") from None
        await checkpoint()


async def writer(stream: SocketStream, replies: MemoryObjectReceiveStream[bytes]) -> None:
    async for blob in replies:
        parts = [blob]
        while True:
            try:
                parts.append(replies.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        await stream.send(b"".join(parts) if len(parts) > 1 else blob)


async def serve_connection(stream: SocketStream, inbox: MemoryObjectSendStream[Inbox]) -> None:
    send, receive = anyio.create_memory_object_stream[bytes](CLIENT_REPLIES_MAX)
    conn = Connection(send)
    decoder = FrameDecoder()
    gone = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, stream, receive)
            with contextlib.suppress(*gone):
                while True:
                    data = await stream.receive(RECEIVE_BYTES)
                    for request in decoder.feed(data):
                        await inbox.send((conn, request))
            tg.cancel_scope.cancel()  # the client went: nobody is left to write to
    except* gone:
        pass
    finally:
        send.close()
        await stream.aclose()


async def serve() -> None:
    """The micro-server: prints its port on stdout, then serves until killed."""
    inbox_send, inbox_receive = anyio.create_memory_object_stream[Inbox](INBOX_ITEMS_MAX)
    listener = await anyio.create_tcp_listener(local_host=HOST, local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(owner, inbox_receive)

        async def handle(stream: SocketStream) -> None:
            await serve_connection(stream, inbox_send)

        print(port, flush=True)
        await listener.serve(handle)


# --------------------------------------------------------------------------- server process


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Server:
    """One server process on ``backend``; a context manager that always kills it."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> Server:
        try:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--serve", self.backend],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
            assert self.proc.stdout is not None
            ready, _, _ = select.select([self.proc.stdout], [], [], SERVER_START_S)
            line = self.proc.stdout.readline() if ready else b""
            if not line.strip().isdigit():
                raise RuntimeError(f"the {self.backend} server did not start (said {line!r})")
            self.port = int(line)
            return self
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_seconds(self) -> tuple[float, float]:
        """User and system CPU the server has used so far, from /proc/<pid>/stat."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --------------------------------------------------------------------------- clients


@dataclass
class LoadResult:
    sent: int = 0
    ok: int = 0
    wrong: int = 0  # a reply with an unknown id or another request's payload
    seconds: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    timed_out: bool = False


def make_payload(client: int, seq: int, payload_bytes: int) -> bytes:
    """Unique per request, so a reply carrying another request's payload is caught."""
    head = b"%d:%d:" % (client, seq)
    return head + b"x" * max(0, payload_bytes - len(head))


async def one_client(
    port: int, client: int, share: int, in_flight: int, payload_bytes: int, out: LoadResult
) -> None:
    stream = await anyio.connect_tcp(HOST, port)
    async with stream:
        decoder = FrameDecoder()
        pending: dict[int, tuple[bytes, float]] = {}
        next_seq = 0

        async def send(count: int) -> None:
            nonlocal next_seq
            requests = []
            now = time.perf_counter()
            for _ in range(count):
                payload = make_payload(client, next_seq, payload_bytes)
                pending[next_seq] = (payload, now)
                requests.append([next_seq, payload])
                next_seq += 1
            out.sent += count
            await stream.send(pack_many(requests))

        await send(min(in_flight, share))
        while pending:
            data = await stream.receive(RECEIVE_BYTES)
            now = time.perf_counter()
            answered = 0
            for reply in decoder.feed(data):
                rid, payload = reply
                sent = pending.pop(rid, None)
                if sent is None or sent[0] != payload:
                    out.wrong += 1
                    continue
                out.ok += 1
                answered += 1
                out.latencies_s.append(now - sent[1])
            more = min(answered, share - next_seq)
            if more > 0:
                await send(more)


async def client_load(
    port: int,
    clients: int,
    requests: int,
    in_flight: int,
    payload_bytes: int,
    timeout_s: float,
) -> LoadResult:
    out = LoadResult()
    shares = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]
    start = time.perf_counter()
    with anyio.move_on_after(timeout_s) as scope:
        async with anyio.create_task_group() as tg:
            for i, share in enumerate(shares):
                if share:
                    tg.start_soon(one_client, port, i, share, in_flight, payload_bytes, out)
    out.seconds = time.perf_counter() - start
    out.timed_out = scope.cancelled_caught
    return out


def client_backend() -> str:
    return "asyncio+uvloop" if uvloop_available() else "asyncio"


# --------------------------------------------------------------------------- measurement


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def measure(
    backend: str,
    *,
    requests: int,
    clients: int,
    in_flights: list[int],
    payload_bytes: int = 100,
    timeout_s: float = 120.0,
    warmup_requests: int = 1000,
) -> list[dict[str, Any]]:
    """Start a server on ``backend``, run one scenario per in-flight count against it,
    stop it; one row per scenario (the server's pid is in every row)."""
    rows = []
    with Server(backend) as server:
        for in_flight in in_flights:
            if warmup_requests:
                run_on(client_backend(), client_load, server.port, clients,
                       warmup_requests, in_flight, payload_bytes, timeout_s)
            user0, sys0 = server.cpu_seconds()
            client0 = time.process_time()
            load = run_on(client_backend(), client_load, server.port, clients,
                          requests, in_flight, payload_bytes, timeout_s)
            client_s = time.process_time() - client0
            user1, sys1 = server.cpu_seconds()
            latencies = sorted(load.latencies_s)
            done = max(1, load.ok)
            rows.append({
                "backend": backend,
                "in_flight": in_flight,
                "clients": clients,
                "requests": requests,
                "payload_bytes": payload_bytes,
                "sent": load.sent,
                "ok": load.ok,
                "wrong": load.wrong,
                "timed_out": load.timed_out,
                "seconds": load.seconds,
                "requests_per_s": load.ok / load.seconds if load.seconds else 0.0,
                "p50_ms": percentile(latencies, 0.50) * 1000,
                "p99_ms": percentile(latencies, 0.99) * 1000,
                "server_user_s": user1 - user0,
                "server_sys_s": sys1 - sys0,
                "server_cpu_us_per_request": (user1 - user0 + sys1 - sys0) / done * 1e6,
                "server_user_us_per_request": (user1 - user0) / done * 1e6,
                "server_sys_us_per_request": (sys1 - sys0) / done * 1e6,
                # share of one core the server was busy: near 1, it is the bottleneck
                "server_busy": (user1 - user0 + sys1 - sys0) / load.seconds
                if load.seconds else 0.0,
                "client_cpu_us_per_request": client_s / done * 1e6,
                "server_pid": server.pid,
            })
    return rows


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Against trio in the same scenario: >1 is better than trio (faster; cheaper)."""
    trio_rows = {r["in_flight"]: r for r in rows if r["backend"] == "trio"}
    for row in rows:
        base = trio_rows.get(row["in_flight"])
        if base is None or not base["requests_per_s"] or not row["server_cpu_us_per_request"]:
            row["rps_vs_trio"] = row["cpu_vs_trio"] = None
            continue
        row["rps_vs_trio"] = row["requests_per_s"] / base["requests_per_s"]
        row["cpu_vs_trio"] = base["server_cpu_us_per_request"] / row["server_cpu_us_per_request"]


def python_only_us(batch: int, requests: int = 20000, payload_bytes: int = 100) -> float:
    """The server's own Python per request, with no loop and no socket: feed ``batch``
    frames to a decoder, build and pack one reply per request, join them for one write."""
    chunk = pack_many([[i, make_payload(0, i, payload_bytes)] for i in range(batch)])
    decoder = FrameDecoder()
    rounds = max(1, requests // batch)
    start = time.process_time()
    for _ in range(rounds):
        parts = [pack(reply_to(r)) for r in decoder.feed(chunk)]
        b"".join(parts)
    return (time.process_time() - start) / (rounds * batch) * 1e6


def fmt_ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| server loop | in flight / client | requests/s | p50 ms | p99 ms "
        "| server CPU µs/req (user+sys) | server busy | client CPU µs/req "
        "| req/s vs trio | CPU vs trio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['in_flight']} | {r['requests_per_s']:,.0f} "
            f"| {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
            f"| {r['server_cpu_us_per_request']:.1f} ({r['server_user_us_per_request']:.1f}"
            f"+{r['server_sys_us_per_request']:.1f}) | {r['server_busy']:.0%} "
            f"| {r['client_cpu_us_per_request']:.1f} "
            f"| {fmt_ratio(r['rps_vs_trio'])} | {fmt_ratio(r['cpu_vs_trio'])} |"
        )
    return "\n".join(lines)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("anyio", "trio", "uvloop", "msgpack"):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--in-flight", type=int, default=8,
                   help="outstanding requests per client in the second scenario")
    p.add_argument("--backends", default=",".join(available_backends()))
    p.add_argument("--payload", type=int, default=100, help="payload bytes per request")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per scenario")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--serve", metavar="BACKEND", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        with contextlib.suppress(KeyboardInterrupt):
            run_on(args.serve, serve)
        return 0

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        if b not in ALL_BACKENDS:
            p.error(f"unknown backend {b!r}; one of {', '.join(ALL_BACKENDS)}")
        if b == "asyncio+uvloop" and not uvloop_available():
            p.error("uvloop is not installed")
    in_flights = sorted({1, args.in_flight})
    rows: list[dict[str, Any]] = []
    for backend in backends:
        print(f"server on {backend} ...", file=sys.stderr, flush=True)
        rows += measure(backend, requests=args.requests, clients=args.clients,
                        in_flights=in_flights, payload_bytes=args.payload,
                        timeout_s=args.timeout)
    add_ratios(rows)
    own = {str(k): python_only_us(k, payload_bytes=args.payload) for k in in_flights}
    rows.sort(key=lambda r: (r["in_flight"], ALL_BACKENDS.index(r["backend"])))
    print(f"\nclients: {args.clients} on {client_backend()} in the parent process "
          f"(the same for every server); {args.requests} requests of {args.payload} bytes "
          f"per scenario; {os.cpu_count()} CPUs, Python {platform.python_version()}\n")
    print(table(rows))
    print("\nthe server's own Python per request (decode, reply, pack, join; no loop, "
          "no socket): " + ", ".join(f"{v:.1f} µs at {k} per read" for k, v in own.items()))
    short = [r for r in rows if r["ok"] != r["requests"] or r["wrong"]]
    for r in short:
        print(f"WARNING: {r['backend']} in-flight {r['in_flight']}: {r['ok']} of "
              f"{r['requests']} replies right, {r['wrong']} wrong"
              + (" (timed out)" if r["timed_out"] else ""), file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "bench/event_loops.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "client_backend": client_backend(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions(),
        "python_only_us_per_request": own,
        "results": rows,
    }, indent=2) + "\n")
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
