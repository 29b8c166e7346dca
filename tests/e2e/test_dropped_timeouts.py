"""An element removed for a client that was told its dequeue timed out is counted
(issue 28, item 4), on real daemons.

While a member is down a dequeue cannot finish: the client is told "the outcome is
unknown" and gives up.  Once the member is back the dequeue goes through and removes an
element nobody will receive: ``dropped_results`` must say so, in ``skueue stats`` and in
the metrics, at once (not only when the retry window forgets the result, which on a quiet
cluster is never).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import skueue.client.blocking
from tests.e2e.daemons import Cluster, skueued_command, spawn, stop, wait_ready
from tests.e2e.test_cli import skueue as run_skueue
from tests.e2e.test_metrics import metrics_address, scrape

WAIT_S = 30.0


def dropped_in_stats(address: str) -> tuple[int, dict[str, Any]]:
    with skueue.client.blocking.connect_blocking(address) as q:
        stats = q.stats()
    return sum(m.get("dropped_results", 0) for m in stats["members"]), stats


def test_a_dequeue_that_timed_out_while_a_member_was_down_counts_its_element(
    skueued_cluster: Callable[..., Cluster], tmp_path: Any
) -> None:
    cluster = skueued_cluster(3, extra_args=("--metrics", "127.0.0.1:0"))
    entry, victim = cluster.daemons[0], cluster.daemons[2]
    with skueue.client.blocking.connect_blocking(entry.address) as q:
        q.enqueue(b"taken-for-nobody")
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)

    out = run_skueue("dequeue", "--node", entry.address, "--timeout", "2")
    assert out.returncode == 1, out
    assert b"outcome is unknown" in out.stderr, out.stderr

    again = spawn(list(victim.proc.args[len(skueued_command()) :]), tmp_path, "again")
    try:
        wait_ready([again])
        deadline = time.monotonic() + WAIT_S
        while True:
            dropped, stats = dropped_in_stats(entry.address)
            if stats["totals"]["removed"] >= 1 and not stats["unreachable"]:
                break
            assert time.monotonic() < deadline, stats
            time.sleep(0.2)
        assert stats["size"] == 0, stats
        assert dropped == 1, stats["members"]
        live = [d for d in cluster.daemons if d is not victim] + [again]
        total = 0.0
        for d in live:
            total += sum(
                v for n, _, v in scrape(metrics_address(d)) if n == "skueue_dropped_results_total"
            )
        assert total == 1, total
    finally:
        assert not stop([again]), again.stderr()
