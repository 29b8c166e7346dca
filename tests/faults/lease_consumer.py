"""A consumer process for the lease fault tests: ``python -m tests.faults.lease_consumer
ADDRESS QUEUE OUT``.  It takes leased messages through ``consume`` and writes one line per
step to OUT, flushed at once, so that a kill -9 leaves a record of what it did:

    got VALUE DELIVERIES REASON      handed out
    acking VALUE                     the ack went out (its outcome is unknown if killed)
    acked VALUE True|False           the ack's answer

It stops after ``IDLE_S`` without a message.
"""

from __future__ import annotations

import sys
from typing import TextIO

import trio

import skueue.client.api

IDLE_S = 3.0
PREFETCH = 20
LEASE_S = 120.0  # longer than the test: only a closed connection returns a message
WORK_S = 0.02  # slow enough that the kills come mid-work


async def main(address: str, queue: str, out_path: str) -> None:
    with open(out_path, "a", buffering=1) as out:  # line-buffered: each line is written
        async with skueue.client.api.connect(address, request_timeout_s=60) as q:
            await consume(q, queue, out)


async def consume(q: skueue.client.api.Client, queue: str, out: TextIO) -> None:
    async with q.consume(queue, prefetch=PREFETCH, lease=LEASE_S, idle=IDLE_S) as messages:
        async for msg in messages:
            value = msg.value.decode()
            out.write(f"got {value} {msg.deliveries} {msg.reason or '-'}\n")
            await trio.sleep(WORK_S)
            out.write(f"acking {value}\n")
            out.write(f"acked {value} {await msg.ack()}\n")


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:4])
