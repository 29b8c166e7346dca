"""The lease checker (skueue/check/leases.py) on small known answers: a good history
passes, and each broken promise is found and named."""

from __future__ import annotations

import io

import pytest

from skueue.check.history import HistoryError
from skueue.check.leases import LeaseEvent, check_leases, read_events, write_events


def lease(c: str, v: str, n: int, t: float, d: int = 1, s: float = 10.0) -> LeaseEvent:
    return LeaseEvent(c, "lease", t, t + 0.1, v, n, d, s)


def end(c: str, kind: str, v: str, n: int, t: float, ok: bool | None = True) -> LeaseEvent:
    return LeaseEvent(c, kind, t, t + 0.1, v, n, ok=ok)


GOOD = [
    lease("A", "x", 1, 0.0),
    end("A", "nack", "x", 1, 1.0),
    lease("B", "x", 7, 1.5, d=2),
    end("B", "ack", "x", 7, 2.0),
    lease("A", "y", 2, 0.5),
    LeaseEvent("A", "close", 3.0, 3.0),
    lease("B", "y", 8, 3.5, d=2),
    end("B", "ack", "y", 8, 4.0, ok=None),  # B died before the answer
    lease("B", "z", 9, 0.0, s=1.0),  # expired
    lease("A", "z", 3, 1.2, d=2),
]


def test_a_good_history_passes() -> None:
    verdict = check_leases(GOOD, ["x", "y", "z"], left=["z"])
    assert verdict.ok, verdict.problems
    assert (verdict.acked, verdict.redelivered, verdict.indeterminate) == (1, 3, 1)


def test_a_lost_element_is_found() -> None:
    verdict = check_leases(GOOD, ["x", "y", "z", "w"], left=["z"])
    assert verdict.problems == ("w was lost: never acked, and not in the queue at the end",)


def test_a_double_ack_and_a_leftover_ack_are_found() -> None:
    events = [*GOOD, end("C", "ack", "x", 5, 9.0)]
    problems = check_leases(events, ["x", "y", "z"], left=["z", "x"]).problems
    assert "x was acked 2 times" in problems
    assert "x was acked and is still there" in problems


def test_two_live_leases_at_once_are_found() -> None:
    events = [lease("A", "x", 1, 0.0, s=30.0), lease("B", "x", 2, 5.0, d=2)]
    problems = check_leases(events, ["x"], left=["x"]).problems
    assert len(problems) == 1 and "x was leased twice at once" in problems[0]


def test_a_delivery_count_that_does_not_rise_is_found() -> None:
    events = [lease("A", "x", 1, 0.0, s=1.0), lease("B", "x", 2, 5.0, d=1)]
    problems = check_leases(events, ["x"], left=["x"]).problems
    assert problems == ("x: delivery 1 came after 1",)


def test_an_element_nobody_inserted_is_found() -> None:
    problems = check_leases([lease("A", "q", 1, 0.0)], [], left=[]).problems
    assert problems == ("q was delivered but never inserted",)


def test_events_round_trip_through_json_lines() -> None:
    buffer = io.StringIO()
    write_events(GOOD, buffer)
    assert read_events(io.StringIO(buffer.getvalue())) == GOOD


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"consumer": "A", "event": "peek", "invoke": 0, "response": 1}', "field 'event'"),
        ('{"consumer": "", "event": "ack", "invoke": 0, "response": 1}', "field 'consumer'"),
        ('{"consumer": "A", "event": "close", "invoke": 2, "response": 1}', "'invoke' <="),
        ('{"consumer": "A", "event": "ack", "invoke": 0, "response": 1, "lease": 1}', "'value'"),
        ('{"consumer": "A", "event": "ack", "invoke": 0, "response": 1, "value": "x"}', "'lease'"),
        (
            '{"consumer": "A", "event": "lease", "invoke": 0, "response": 1, "value": "x", '
            '"lease": 1, "deliveries": 0}',
            "'deliveries'",
        ),
        ("[1]", "a JSON object"),
        ("{", "invalid JSON"),
    ],
)
def test_malformed_events_are_refused_with_their_line(line: str, message: str) -> None:
    with pytest.raises(HistoryError, match=message) as raised:
        read_events(io.StringIO("\n" + line + "\n"))
    assert "line 2" in str(raised.value)


def test_an_element_removed_for_good_and_also_acked_is_found() -> None:
    events = [lease("A", "x", 1, 0.0), end("A", "ack", "x", 1, 1.0)]
    problems = check_leases(events, ["x", "y"], taken=["x", "y", "y"]).problems
    assert problems == (
        "x was removed 1 time(s) and acked 1",
        "y was removed 2 time(s) and acked 0",
    )
