"""A consumer process for the lease fault tests: ``python -m tests.faults.lease_consumer
ADDRESS QUEUE NAME OUT``.  It takes leased messages through ``consume`` and appends one
JSON object per lease event to OUT (:class:`skueue.check.leases.LeaseEvent`'s fields),
flushed at once, so that a kill -9 leaves the record of what it did: ``lease`` when a
message is handed out, then ``ack`` with the answer once it came (``ok`` null: the
consumer died before).  Times are the system's monotonic clock, shared by every process
on the machine.  It stops after ``IDLE_S`` without a message.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

import anyio
import trio

import skueue.client.api
from skueue.client.consumer import Message

IDLE_S = 3.0
PREFETCH = 20
LEASE_S = 120.0  # longer than the test: only a closed connection returns a message
WORK_S = 0.02  # slow enough that the kills come mid-work


def record(out: TextIO, **event: Any) -> None:
    out.write(json.dumps(event) + "\n")


async def consume(q: skueue.client.api.Client, queue: str, name: str, out: TextIO) -> None:
    async with q.consume(queue, prefetch=PREFETCH, lease=LEASE_S, idle=IDLE_S) as messages:
        async for msg in messages:
            await handle(msg, name, out)


async def handle(msg: Message, name: str, out: TextIO) -> None:
    # The lease's request went out at deadline - LEASE_S on the client's clock.
    shift = time.monotonic() - anyio.current_time()
    value, lease = msg.value.decode(), msg.leased.lease
    common = {"consumer": name, "value": value, "lease": lease}
    asked = msg.leased.deadline - LEASE_S + shift
    record(out, **common, event="lease", invoke=asked, response=time.monotonic(),
           deliveries=msg.deliveries, lease_s=LEASE_S)  # fmt: skip
    await trio.sleep(WORK_S)
    invoke = time.monotonic()
    record(out, **common, event="ack", invoke=invoke, response=invoke, ok=None)
    ok = await msg.ack()
    record(out, **common, event="ack", invoke=invoke, response=time.monotonic(), ok=ok)


async def main(address: str, queue: str, name: str, out_path: str) -> None:
    with open(out_path, "a", buffering=1) as out:  # line-buffered: each line is written
        async with skueue.client.api.connect(address, request_timeout_s=60) as q:
            await consume(q, queue, name, out)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:5])
