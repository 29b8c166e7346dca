"""Per-queue statistics (skueue.host.queue_stats): counts, rolling rates like the load
average, the cluster's sums, a departed member's counts handed to its heir."""

from __future__ import annotations

import math

import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.host.directory import parse_departure
from skueue.host.queue_stats import RATE_SAMPLE_S, RATE_WINDOWS_S, QueueStats, merge


def test_a_steady_rate_is_what_every_average_converges_to() -> None:
    stats = QueueStats()
    stats.sample(0.0)
    for step in range(1, 2000):  # 10 inserts a second, 2 removes, for 10,000 s
        stats.count("jobs", inserted=50, removed=10)
        stats.sample(step * RATE_SAMPLE_S)
    c = stats.queues["jobs"]
    assert c.insert_rate == pytest.approx([10.0] * 3, rel=1e-3)
    assert c.remove_rate == pytest.approx([2.0] * 3, rel=1e-3)


def test_a_burst_shows_in_the_short_average_first_and_fades_from_the_long_one_last() -> None:
    stats = QueueStats()
    stats.sample(0.0)
    stats.count("q", inserted=600)  # 600 in the first 5 s, then nothing
    stats.sample(RATE_SAMPLE_S)
    one, five, fifteen = stats.queues["q"].insert_rate
    assert one > five > fifteen > 0
    assert one == pytest.approx(120 * (1 - math.exp(-RATE_SAMPLE_S / RATE_WINDOWS_S[0])))
    stats.sample(RATE_SAMPLE_S + 600)  # ten quiet minutes
    one, five, fifteen = stats.queues["q"].insert_rate
    assert one < five < fifteen


def test_samples_come_no_faster_than_the_interval_and_survive_a_clock_going_back() -> None:
    stats = QueueStats()
    stats.sample(100.0)
    stats.count("q", inserted=5)
    stats.sample(101.0)  # too soon: nothing folded yet
    assert stats.queues["q"].insert_rate == [0.0, 0.0, 0.0]
    stats.sample(50.0)  # a clock that went back restarts the interval (and its counts)
    stats.sample(50.0 + RATE_SAMPLE_S)
    assert stats.queues["q"].insert_rate == [0.0, 0.0, 0.0]
    stats.count("q", inserted=5)
    stats.sample(50.0 + 2 * RATE_SAMPLE_S)
    assert stats.queues["q"].insert_rate[0] > 0


def test_members_add_up_and_a_departed_members_counts_go_to_its_heir() -> None:
    a, b = QueueStats(), QueueStats()
    a.count("jobs", inserted=3, removed=1, empty=2)
    b.count("jobs", inserted=4)
    b.count("mail", removed=0, empty=1)
    total = merge([a.as_dict(), b.as_dict()])
    assert (total["jobs"]["inserted"], total["jobs"]["removed"], total["jobs"]["empty"]) == (
        7,
        1,
        2,
    )
    assert total["mail"]["empty"] == 1
    frame = ["departed", "p2", "p1", {"inserted": 4, "queues": b.counts()}]
    departure = parse_departure(frame)
    a.inherit(departure.queues)
    assert merge([a.as_dict()])["jobs"]["inserted"] == 7
    a.sample(0.0)
    a.sample(RATE_SAMPLE_S)
    assert a.queues["jobs"].insert_rate == [0.0, 0.0, 0.0]  # inherited counts are no burst


@pytest.mark.parametrize(
    "queues",
    [
        [],
        {"bad name": {"inserted": 1}},
        {"q": {"inserted": -1}},
        {"q": {"inserted": 1.5}},
        {"q": 3},
        {f"q{i}": {} for i in range(10_001)},
    ],
)
def test_a_departure_with_bad_queue_counts_is_refused(queues: object) -> None:
    with pytest.raises(RemoteProtocolError, match="departed"):
        parse_departure(["departed", "p2", "p1", {"queues": queues}])
