"""Many tasks on one connection to real daemons (issue 30, item 4): their enqueues and
dequeues are joined into fewer requests, and the history, recorded per call, is still
linearizable, with nothing lost or duplicated after a drain."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
import trio

import skueue
from skueue.check.checker import check
from skueue.check.history import Record
from skueue.cluster.loadgen import Outcome, as_text, element, records_of, removal
from tests.e2e.daemons import Cluster

TASKS = 24
CALLS_PER_TASK = 20  # alternating enqueue and dequeue
DRAIN_MAX = TASKS * CALLS_PER_TASK  # a drain never needs more removes than were enqueued
DEADLINE_S = 60.0


@pytest.mark.trio
async def test_concurrent_calls_on_one_connection_are_joined_and_linearizable(
    skueued_cluster: Callable[..., Cluster],
) -> None:
    cluster = skueued_cluster(2)
    records: list[Record] = []
    with trio.fail_after(DEADLINE_S):
        async with skueue.connect(cluster.addresses[0]) as q:

            async def lane(task: int) -> None:
                name = f"t{task}"
                for seq in range(CALLS_PER_TASK):
                    inserting = (seq + task) % 2 == 0  # half the tasks begin with a dequeue
                    invoke = time.monotonic()
                    if inserting:
                        value = element(name, seq, 40)
                        got = await q.enqueue(value)
                        outcome = Outcome(as_text(value), got.position, got.ord)
                    else:
                        [taken] = await q.remove(1)
                        outcome = removal(taken)
                    op = "enqueue" if inserting else "dequeue"
                    records.extend(records_of(name, seq, op, [outcome], invoke, time.monotonic()))

            async with trio.open_nursery() as nursery:
                for task in range(TASKS):
                    nursery.start_soon(lane, task)
            requests_sent = q._link.requests.last_rid  # every frame took a request id

            for seq in range(DRAIN_MAX + 1):
                invoke = time.monotonic()
                [taken] = await q.remove(1)
                outcome = removal(taken)
                records.extend(
                    records_of(
                        "drain", seq, "dequeue", [outcome], invoke, time.monotonic(), phase="drain"
                    )  # fmt: skip
                )
                if taken.value is None:
                    break

    calls = TASKS * CALLS_PER_TASK
    assert requests_sent < calls, "no call was joined with another"
    verdict = check(records, drained=True)
    assert verdict.ok, verdict.reason
    enqueued = Counter(r.value for r in records if r.op == "enqueue")
    dequeued = Counter(r.value for r in records if r.op == "dequeue" and r.value is not None)
    assert max(dequeued.values()) == 1, "an element was dequeued twice"
    assert dequeued == enqueued, "an element was lost"
    assert records[-1].value is None  # the drain ended on an empty queue
