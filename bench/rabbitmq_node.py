"""A RabbitMQ node of a benchmark's own, and the benchmark's connections to it.

- :class:`RabbitMQ`: Debian's rabbitmq-server (installed with apt-get where missing) as
  the current user, on free loopback ports, its whole environment in a temporary
  directory removed by :meth:`RabbitMQ.stop` (which also stops the epmd it started);
- :func:`measure_on_node`: a measurement on a node of its own, stopped whatever happens;
- :class:`Rabbit`: connections to that node, each with its channel, all closed together;
- :func:`persistent` and :func:`messages_left`: a durable message, and what a queue still
  holds once acks have settled.

bench/ is not a package: scripts put this folder on ``sys.path`` and import it by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from bench_support import (
    HOST,
    ensure_package,
    first_line,
    free_port,
    kill_pid,
    log_tail,
    stop_popen,
)
from interrupts import no_interrupt, run_async

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 10.0
T = TypeVar("T")


class RabbitMQ:
    """A RabbitMQ node of our own: its whole environment in a temporary directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="durable-peers-rabbitmq-"))
        self.port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid_file = self.dir / "beam.pid"
        self.log = self.dir / "server.log"

    def env(self) -> dict[str, str]:
        d = str(self.dir)
        return dict(
            os.environ,
            HOME=d,
            RABBITMQ_NODENAME="bench@localhost",
            RABBITMQ_NODE_IP_ADDRESS=HOST,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS=HOST,
            RABBITMQ_MNESIA_BASE=f"{d}/mnesia",
            RABBITMQ_LOG_BASE=f"{d}/log",
            RABBITMQ_CONFIG_FILE=f"{d}/rabbitmq",
            RABBITMQ_ENABLED_PLUGINS_FILE=f"{d}/enabled_plugins",
            RABBITMQ_PID_FILE=str(self.pid_file),
        )

    def ctl(self, *args: str, timeout_s: float) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(RABBITMQ_BIN / "rabbitmqctl"), *args],
            env=self.env(),
            capture_output=True,
            timeout=timeout_s,
        )

    def start(self) -> None:
        ensure_package("rabbitmq-server", "rabbitmq-server", str(RABBITMQ_BIN / "rabbitmq-server"))
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text("loopback_users = none\nlog.file.level = warning\n")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(RABBITMQ_BIN / "rabbitmq-server")],
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us alone; we stop it
            )
        try:
            waited = self.ctl(
                "wait",
                "--timeout",
                str(int(START_TIMEOUT_S)),
                str(self.pid_file),
                timeout_s=START_TIMEOUT_S + 30,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"rabbitmq did not start in {START_TIMEOUT_S:g} s") from None
        if waited.returncode != 0:
            why = (waited.stderr or waited.stdout).decode(errors="replace").strip()
            raise RuntimeError(f"rabbitmq did not start: {why[-300:]} {log_tail(self.log)}")

    def beam_pid(self) -> int:
        return int(self.pid_file.read_text().split()[0])

    def epmd_pids(self) -> list[int]:
        """The epmd this node started: ours by its ERL_EPMD_PORT (nobody else's)."""
        mark = f"ERL_EPMD_PORT={self.epmd_port}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if (proc / "comm").read_text().strip() != "epmd":
                    continue
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        beam = None
        with contextlib.suppress(OSError, ValueError, IndexError):
            beam = self.beam_pid()
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.ctl("stop", str(self.pid_file), timeout_s=STOP_TIMEOUT_S)
            if beam is not None:
                kill_pid(beam)
            stop_popen(self.proc)
        for pid in self.epmd_pids():
            kill_pid(pid)
        shutil.rmtree(self.dir, ignore_errors=True)


def measure_on_node(measure: Callable[..., Awaitable[T]], *args: Any) -> tuple[T, str]:
    """``measure(node, *args)`` on asyncio against a node of its own, started here and
    stopped whatever happens (Ctrl-C included); its result and the server's version."""
    node = RabbitMQ()
    try:
        node.start()
        result = run_async(measure, node, *args)
        version = first_line([str(RABBITMQ_BIN / "rabbitmqctl"), "version"], "", node.env())
    finally:
        with no_interrupt():
            node.stop()
    return result, f"RabbitMQ {version}".strip()


class Rabbit:
    """Connections to one node, all closed by :meth:`close`."""

    def __init__(self, port: int) -> None:
        self.url = f"amqp://guest:guest@{HOST}:{port}/"
        self.connections: list[Any] = []

    async def channel(self, **options: Any) -> Any:
        import aio_pika

        with anyio.fail_after(30):
            connection = await aio_pika.connect(self.url)
        self.connections.append(connection)
        return await connection.channel(**options)

    async def quorum_queue(self, channel: Any, name: str) -> None:
        await channel.queue_delete(name)
        await channel.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"})

    async def close(self, keep: int = 0) -> None:
        """Close every connection but the first ``keep``."""
        for connection in self.connections[keep:]:
            with contextlib.suppress(Exception), anyio.move_on_after(10):
                await connection.close()
        del self.connections[keep:]


def persistent(body: bytes) -> Any:
    import aio_pika

    return aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)


async def messages_left(channel: Any, name: str, expected: int) -> int:
    """Messages still ready in the queue once the closed consumers' acks have settled
    (or after SETTLE_TIMEOUT_S)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        with anyio.fail_after(30):
            queue = await channel.declare_queue(name, passive=True)
        left = int(queue.declaration_result.message_count or 0)
        if left <= max(0, expected) or time.monotonic() > deadline:
            return left
        await anyio.sleep(0.1)
