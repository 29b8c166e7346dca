"""A workload that keeps going while members join, leave, crash and come back, then drains.

Run as ``python -m tests.e2e.netns_workload`` (from inside a network namespace: the test
of ``deploy/netns_cluster.sh`` runs it with ``ip netns exec``).  One client per
``--nodes`` address enqueues unique elements (``w<client>-<seq>``) and dequeues, one
operation at a time, until ``--stop-file`` exists or ``--ops-max`` operations were issued;
then one client drains the queue through the first address until it reports empty.

Outcomes are kept apart, because an operator's cluster can lose a reply without losing
the operation:

- an operation that returned is a :class:`~skueue.check.history.Record` in ``--history``
  (JSON lines), the drain's marked ``phase="drain"``;
- an operation whose outcome the client never learned (the request timed out, or the
  connection broke with it in flight) is *indeterminate*: the summary lists the elements
  of such enqueues (each may or may not be in the queue) and counts such dequeues (each
  may have removed one element that nobody received);
- a request the daemon refused as retryable (``NodeUnavailable``: nothing was done) is
  counted and not recorded.

``--progress`` holds the number of completed operations, rewritten every 0.1 s, so that
a test can act while the workload runs.  The summary (one JSON line on stdout) carries
the counts; the checks are the test's (``tests/e2e/oracle.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import anyio
import trio

import skueue
from skueue.check.history import Record, write_jsonl
from skueue.client.errors import NodeUnavailable, NodeUnreachable, RequestTimeout

DRAIN_BATCH = 200
INSERT_EVERY = 3  # of every 5 operations, 3 enqueue: the queue grows, the drain has work
PROGRESS_INTERVAL_S = 0.1


class Outcomes:
    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.records: list[Record] = []
        self.unknown_inserts: list[str] = []
        self.unknown_removals = 0
        self.refused = 0
        self.issued = 0

    def now(self) -> float:
        return time.perf_counter() - self.started


async def one_client(
    address: str, name: str, out: Outcomes, stop: Path, ops_max: int, timeout_s: float
) -> None:
    async with skueue.connect(address, request_timeout_s=timeout_s) as q:
        seq = 0
        while not stop.exists() and out.issued < ops_max:
            out.issued += 1
            inserting = seq % 5 < INSERT_EVERY
            value = f"{name}-{seq}"
            invoke = out.now()
            try:
                if inserting:
                    got = (await q.insert([value.encode()]))[0]
                    record = Record(name, seq, "enqueue", value, invoke, out.now(),
                                    got.position, got.ord)  # fmt: skip
                else:
                    removed = (await q.remove(1))[0]
                    taken = None if removed.value is None else removed.value.decode()
                    record = Record(name, seq, "dequeue", taken, invoke, out.now(),
                                    removed.position, removed.ord)  # fmt: skip
            except NodeUnavailable:
                out.refused += 1  # nothing was done: the next operation goes on
                await trio.sleep(0.05)
                continue
            except (RequestTimeout, NodeUnreachable):
                if inserting:
                    out.unknown_inserts.append(value)
                else:
                    out.unknown_removals += 1
                # A process of a history is sequential: after an operation of unknown
                # outcome this client goes on as another one.
                name, seq = f"{name}'", 0
                continue
            out.records.append(record)
            seq += 1


async def drain(address: str, out: Outcomes, timeout_s: float) -> int:
    drained, seq = 0, 0
    async with skueue.connect(address, request_timeout_s=timeout_s) as q:
        while True:
            invoke = out.now()
            batch = await q.remove(DRAIN_BATCH)
            response = out.now()
            for r in batch:
                value = None if r.value is None else r.value.decode()
                out.records.append(Record("drain", seq, "dequeue", value, invoke, response,
                                          r.position, r.ord, "drain"))  # fmt: skip
                seq += 1
            values = [r for r in batch if r.value is not None]
            drained += len(values)
            if len(values) < len(batch):
                return drained


async def main(args: argparse.Namespace) -> dict[str, object]:
    out = Outcomes()
    nodes = args.nodes.split(",")
    progress, stop = Path(args.progress), Path(args.stop_file)

    async def report() -> None:
        while True:
            done = len(out.records)
            tmp = progress.with_suffix(".tmp")
            tmp.write_text(str(done))
            os.replace(tmp, progress)
            await trio.sleep(PROGRESS_INTERVAL_S)

    with trio.fail_after(args.deadline_s):
        async with trio.open_nursery() as watcher:
            watcher.start_soon(report)
            async with anyio.create_task_group() as clients:
                for i in range(len(nodes)):
                    address = ",".join(nodes[i:] + nodes[:i]) if args.seed_lists else nodes[i]
                    clients.start_soon(
                        one_client, address, f"w{i}", out, stop, args.ops_max, args.timeout_s
                    )
            workload_s = out.now()
            drained = await drain(nodes[0], out, args.timeout_s)
            watcher.cancel_scope.cancel()
    with open(args.history, "w") as f:
        write_jsonl(out.records, f)
    return {
        "records": len(out.records),
        "issued": out.issued,
        "drained": drained,
        "unknown_inserts": out.unknown_inserts,
        "unknown_removals": out.unknown_removals,
        "refused": out.refused,
        "workload_seconds": round(workload_s, 2),
        "seconds": round(out.now(), 2),
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.e2e.netns_workload")
    p.add_argument("--nodes", required=True, help="one client per address, comma-separated")
    p.add_argument("--history", required=True, help="write the records here (JSON lines)")
    p.add_argument("--progress", required=True, help="completed operations, kept current")
    p.add_argument("--stop-file", required=True, help="stop issuing once this file exists")
    p.add_argument("--ops-max", type=int, default=5000, help="issue at most this many")
    p.add_argument("--timeout-s", type=float, default=30.0, help="each request's timeout")
    p.add_argument("--deadline-s", type=float, default=100.0, help="the whole run's bound")
    p.add_argument("--seed-lists", action="store_true", help="each client gets every address "
                   "as its seed list, its own first (it moves on when its member is gone)")
    return p.parse_args(argv)


if __name__ == "__main__":
    print(json.dumps(trio.run(main, parse())), flush=True)
