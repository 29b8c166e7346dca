"""What the daemon logs for ``skueue analyze`` (issue 8, item 20): batch sizes at debug."""

from __future__ import annotations

import json
from collections.abc import Callable

import trio

import skueue
from tests.e2e.daemons import Cluster


def test_debug_logs_carry_the_size_of_every_batch_with_operations(
    skueued_cluster: Callable[..., Cluster],
) -> None:
    cluster = skueued_cluster(2, extra_args=("--log-level", "debug", "--log-format", "json"))

    async def main() -> None:
        with trio.fail_after(30):
            async with skueue.connect(cluster.addresses[0]) as q:
                await q.enqueue_many([b"a", b"b", b"c"])
                assert await q.dequeue_many(3) == [b"a", b"b", b"c"]

    trio.run(main)
    events = [
        json.loads(line)
        for line in cluster.daemons[0].stderr().splitlines()
        if line.startswith("{") and '"batch up"' in line
    ]
    assert events, "no 'batch up' event in the debug log"
    assert all(e["batch_ops"] > 0 and e["node"] in ("left", "middle", "right") for e in events)
    assert sum(e["batch_ops"] for e in events if e["node"] == "left") >= 6  # 3 in, 3 out
