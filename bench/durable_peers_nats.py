"""bench/durable_peers.py's NATS row: a JetStream work queue on nats-server's file store (of
its own, on a free port), nats-py producers with ``publish_async``, one durable pull
consumer shared by the consumers."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from bench_support import HOST, ensure_package, first_line, free_port, log_tail, stop_popen
from durable_peers_rows import (
    CpuMeter,
    Phase,
    Workload,
    head,
    make_row,
    progress,
    tally,
    timed_out,
)
from interrupts import no_interrupt, run_async

from skueue.cluster.loadgen import element, shares

NATS_STREAM = "DURABLE_PEERS"
NATS_SUBJECT = "durable-peers.q"
NATS_CONSUMER = "workers"
NATS_SYNC_ALWAYS_LABEL = "JetStream file store (sync_interval always)"
SETTLE_TIMEOUT_S = 10.0


class Nats:
    def __init__(self, sync_always: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="durable-peers-nats-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "server.log"
        self.binary = "nats-server"
        self.sync_always = sync_always

    def start(self) -> None:
        self.binary = binary = ensure_package("nats-server", "nats-server")
        config = []
        if self.sync_always:  # nats-server 2.9 refuses the field: it then fails to start
            (self.dir / "nats.conf").write_text("jetstream { sync_interval: always }\n")
            config = ["-c", str(self.dir / "nats.conf")]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    "-a",
                    HOST,
                    "-p",
                    str(self.port),
                    "-js",
                    "-sd",
                    str(self.dir / "js"),
                    "-P",
                    str(self.dir / "nats.pid"),
                    *config,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {log_tail(self.log)}")
            if "Server is ready" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise RuntimeError("nats-server did not start in 30 s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_popen(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


async def nats_row(server: Nats, w: Workload) -> dict:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType

    assert server.proc is not None
    pid = server.proc.pid
    url = f"nats://{HOST}:{server.port}"
    sent: list[str] = []
    got: list[str] = []
    connections: list[Any] = []

    async def connect() -> Any:
        with anyio.fail_after(30):
            nc = await nats.connect(url, allow_reconnect=False)
        connections.append(nc)
        return nc

    try:
        jsm = (await connect()).jetstream()
        await jsm.add_stream(
            name=NATS_STREAM,
            subjects=[NATS_SUBJECT],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
        )
        await jsm.add_consumer(
            NATS_STREAM,
            ConsumerConfig(
                durable_name=NATS_CONSUMER,
                ack_policy=AckPolicy.EXPLICIT,
                max_ack_pending=max(1000, 2 * w.clients * w.window),
            ),
        )

        produce = Phase()
        failed: list[BaseException] = []

        async def producer(index: int, count: int) -> None:
            js = (await connect()).jetstream(publish_async_max_pending=w.window)
            for seq in range(count):
                body = element(f"p{index}", seq, w.value_bytes)
                future = await js.publish_async(NATS_SUBJECT, body)  # the phase bounds any stall
                t = time.perf_counter()

                def done(f: Any, t: float = t, name: str = head(body)) -> None:
                    if f.cancelled() or f.exception() is not None:
                        failed.append(f.exception() or RuntimeError("cancelled"))
                        return
                    produce.latencies.append((time.perf_counter() - t) * 1000)
                    sent.append(name)

                future.add_done_callback(done)
            await js.publish_async_completed()

        consume = Phase()

        async def consumer(count: int) -> None:
            js = (await connect()).jetstream()
            sub = await js.pull_subscribe_bind(durable=NATS_CONSUMER, stream=NATS_STREAM)
            while count > 0:
                t = time.perf_counter()
                try:
                    msgs = await sub.fetch(min(w.window, count), timeout=5)
                except nats.errors.TimeoutError:
                    continue  # bounded by the phase's timeout
                consume.latencies.append((time.perf_counter() - t) * 1000)
                for msg in msgs:
                    await msg.ack()  # plain ack: no reply awaited
                    got.append(head(msg.data))
                count -= len(msgs)

        meter = CpuMeter([pid])
        start = time.perf_counter()
        with anyio.fail_after(w.timeout_s):
            async with anyio.create_task_group() as tg:
                for i, share in enumerate(shares(w.messages, w.clients)):
                    tg.start_soon(producer, i, share)
        produce.seconds = time.perf_counter() - start
        if failed:
            print(f"nats: {len(failed)} publishes failed, e.g. {failed[0]!r}", file=sys.stderr)

        start = time.perf_counter()
        with anyio.move_on_after(w.timeout_s) as scope:
            async with anyio.create_task_group() as tg:
                for share in shares(len(sent), w.clients):
                    tg.start_soon(consumer, share)
        if scope.cancelled_caught:  # messages missing: the row says how many
            timed_out("nats", w, len(got), len(sent))
        with anyio.fail_after(30):
            for nc in connections:
                await nc.flush()  # every ack has reached the server
        consume.seconds = time.perf_counter() - start
        cpu = meter.used()
        # A work queue drops a message once its ack is processed: wait for that to settle.
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            left = (await jsm.stream_info(NATS_STREAM)).state.messages
            if left == 0 or time.monotonic() > deadline:
                break
            await anyio.sleep(0.1)
        return make_row(
            "nats", "always", "confirm", w, produce, consume, cpu, tally(sent, got, left)
        )
    finally:
        for nc in connections:
            with contextlib.suppress(Exception), anyio.fail_after(10):
                await nc.close()


def measure_nats(w: Workload) -> list[dict]:
    server = Nats(w.nats_sync_always)
    try:
        server.start()
        row = run_async(nats_row, server, w)
        row["server"] = first_line([server.binary, "--version"], "nats-server")
        if w.nats_sync_always:
            row["durability_label"] = NATS_SYNC_ALWAYS_LABEL
        progress(row)
        return [row]
    finally:
        with no_interrupt():
            server.stop()
