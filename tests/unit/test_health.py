"""Readiness: in the ring, peers reachable, not stalled in an update phase
(runtime/operations/health.py; issue 15, item 2)."""

from __future__ import annotations

import pytest

from skueue.cli.skueue import build_parser
from skueue.core.ops import Structure
from skueue.core.stats import NodeStats, ProcessStats
from skueue.runtime.limits import Limits
from skueue.runtime.operations.health import PhaseWatch, readiness

STALL_S = Limits().update_phase_stall_s


def stats(stage: int = 0, phases: int = 0, **state: bool) -> ProcessStats:
    node = NodeStats(0, 0, 0, stage, phases)
    flags = {"joined": True, "leaving": False, "departed": False, **state}
    return ProcessStats(
        "p", Structure.QUEUE, {"left": node, "middle": node, "right": node},
        anchor=False, size=None, alone=False, **flags,
    )  # fmt: skip


def test_a_member_in_the_ring_with_its_peers_up_is_ready() -> None:
    r = readiness(stats(), {}, PhaseWatch(), STALL_S, now=0.0)
    assert (r.ready, r.reason) == (True, "ready")


def test_each_reason_to_be_not_ready() -> None:
    watch = PhaseWatch()
    cases = [
        (None, {}, "starting: waiting for its peers or replaying its log"),
        (stats(joined=False), {}, "joining: not in the ring yet"),
        (stats(leaving=True), {}, "leaving the cluster"),
        (stats(departed=True, joined=False), {}, "left the cluster"),
        (stats(), {"b": 3.4, "a": 12.0}, "peers unreachable: a (down 12 s), b (down 3 s)"),
    ]
    for process, down, reason in cases:
        r = readiness(process, down, watch, STALL_S, now=0.0)
        assert (r.ready, r.reason) == (False, reason)


def test_an_update_phase_is_stalled_once_it_lasts_the_limit() -> None:
    watch = PhaseWatch()
    assert readiness(stats(1, 1), {}, watch, STALL_S, now=100.0).ready
    assert readiness(stats(2, 1), {}, watch, STALL_S, now=100.0 + STALL_S - 0.1).ready
    r = readiness(stats(2, 1), {}, watch, STALL_S, now=100.0 + STALL_S)
    assert (r.ready, r.reason) == (False, "stalled in an update phase: stage joins for 30 s")


def test_a_new_phase_starts_a_new_clock() -> None:
    watch = PhaseWatch()
    assert readiness(stats(1, 1), {}, watch, STALL_S, now=0.0).ready
    # Seen again much later, but it is the next phase (one more entered): not stalled.
    assert readiness(stats(1, 2), {}, watch, STALL_S, now=STALL_S * 2).ready
    assert readiness(stats(), {}, watch, STALL_S, now=STALL_S * 3).ready  # over
    assert readiness(stats(1, 2), {}, watch, STALL_S, now=STALL_S * 4).ready  # seen anew


def test_the_stall_limit_has_its_default() -> None:
    assert STALL_S == 30.0


def test_skueue_health_takes_tls_options_with_node_but_not_node_with_metrics() -> None:
    """``--node`` and ``--metrics`` are alternatives; the TLS options go with ``--node``
    (a TLS cluster's health is asked over TLS)."""
    parser = build_parser()
    args = parser.parse_args(["health", "--node", "10.0.0.1:7400", "--tls-ca", "ca.crt"])
    assert (args.node, args.tls_ca) == ("10.0.0.1:7400", "ca.crt")
    with pytest.raises(SystemExit):
        parser.parse_args(["health", "--node", "10.0.0.1:7400", "--metrics", "10.0.0.1:9464"])
