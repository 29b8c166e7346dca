"""Records, their JSON-lines form, and whole-history validation."""

from __future__ import annotations

import io
import json

import attrs
import pytest

from skueue.check.history import (
    HistoryError,
    Record,
    read_jsonl,
    record_from_json,
    record_to_json,
    structure_of,
    validate_history,
    write_jsonl,
)

GOOD = {"process": "A", "seq": 0, "op": "enqueue", "value": "x", "invoke": 0, "response": 1.5}


def test_round_trip_through_jsonl() -> None:
    records = [
        Record("A", 0, "enqueue", "x", 0, 1),
        Record("B", 0, "dequeue", None, 0.5, 2.25),
        Record("B", 1, "dequeue", "x", 3, 4, position=1, ord=2),
    ]
    buf = io.StringIO()
    write_jsonl(records, buf)
    assert buf.getvalue().count("\n") == 3
    assert read_jsonl(io.StringIO(buf.getvalue())) == records


def test_to_json_omits_unknown_position_and_ord() -> None:
    d = record_to_json(Record("A", 0, "push", "x", 0, 1))
    assert set(d) == {"process", "seq", "op", "value", "invoke", "response"}
    d = record_to_json(Record("A", 0, "push", "x", 0, 1, position=3, ord=7))
    assert d["position"] == 3 and d["ord"] == 7


def test_from_json_keeps_number_types_and_ignores_extra_keys() -> None:
    r = record_from_json({**GOOD, "note": "anything", "ord": 4})
    assert r == Record("A", 0, "enqueue", "x", 0, 1.5, ord=4)
    assert isinstance(r.invoke, int) and isinstance(r.response, float)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"process": 3}, "process"),
        ({"process": ""}, "process"),
        ({"seq": -1}, "seq"),
        ({"seq": 1.0}, "seq"),
        ({"seq": True}, "seq"),
        ({"op": "peep"}, "op"),
        ({"value": None}, "value"),  # an enqueue needs its argument
        ({"op": "dequeue", "value": 5}, "value"),
        ({"invoke": "0"}, "invoke"),
        ({"response": None}, "response"),
        ({"response": float("nan")}, "response"),
        ({"invoke": 2, "response": 1}, "response"),
        ({"ord": "1"}, "ord"),
        ({"position": 1.5}, "position"),
    ],
)
def test_from_json_names_the_bad_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(HistoryError, match=f"'{field}'"):
        record_from_json({**GOOD, **change})


@pytest.mark.parametrize("field", ["process", "seq", "op", "value", "invoke", "response"])
def test_from_json_names_a_missing_field(field: str) -> None:
    d = dict(GOOD)
    del d[field]
    with pytest.raises(HistoryError, match=f"missing field '{field}'"):
        record_from_json(d)


def test_from_json_rejects_non_objects() -> None:
    with pytest.raises(HistoryError, match="JSON object"):
        record_from_json([1, 2])


def test_history_error_is_a_value_error() -> None:
    assert issubclass(HistoryError, ValueError)


def test_read_names_the_line() -> None:
    good = json.dumps(GOOD)
    with pytest.raises(HistoryError, match="line 3: invalid JSON"):
        read_jsonl(io.StringIO(f"{good}\n\n{{oops\n"))
    bad = json.dumps({**GOOD, "op": "peep"})
    with pytest.raises(HistoryError, match="line 2: field 'op'"):
        read_jsonl(io.StringIO(f"{good}\n{bad}\n"))


def test_read_skips_blank_lines() -> None:
    good = json.dumps(GOOD)
    assert len(read_jsonl(io.StringIO(f"\n{good}\n  \n{good}"))) == 2


def test_structure_of() -> None:
    q = [Record("A", 0, "enqueue", "x", 0, 1), Record("A", 1, "dequeue", None, 2, 3)]
    s = [Record("A", 0, "push", "x", 0, 1), Record("A", 1, "pop", "x", 2, 3)]
    assert structure_of(q) == "queue"
    assert structure_of(s) == "stack"
    assert structure_of([]) == "queue"
    with pytest.raises(HistoryError, match="mixes"):
        structure_of(q + [Record("B", 0, "pop", None, 0, 1)])


def test_validate_history() -> None:
    a = Record("A", 0, "enqueue", "x", 0, 1)
    validate_history([a, Record("A", 2, "enqueue", "y", 2, 3)])  # gaps are fine
    with pytest.raises(HistoryError, match="share process 'A' seq 0"):
        validate_history([a, Record("A", 0, "dequeue", None, 2, 3)])
    with pytest.raises(HistoryError, match="response before invoke"):
        validate_history([Record("A", 0, "enqueue", "x", 2, 1)])
    with pytest.raises(HistoryError, match="without a value"):
        validate_history([Record("A", 0, "push", None, 0, 1)])
    with pytest.raises(HistoryError, match="unknown op"):
        validate_history([Record("A", 0, "peep", None, 0, 1)])


def test_describe_is_one_stable_line() -> None:
    assert Record("A", 0, "enqueue", "x", 0, 4).describe() == "A#0 enqueue(x) [0, 4]"
    assert Record("B", 1, "dequeue", None, 5, 6).describe() == "B#1 dequeue -> empty [5, 6]"
    r = Record("B", 2, "pop", "y", 5, 6, position=3, ord=9)
    assert r.describe() == "B#2 pop -> y [5, 6] pos=3 ord=9"


def test_phase_is_optional_and_round_trips() -> None:
    """Issue 8 item 19: bench marks its drain records ``"phase": "drain"`` so that
    analysis can leave them out of throughput and latency; other records carry no phase."""
    drain = Record("c4", 0, "dequeue", None, 1, 2, position=None, ord=5, phase="drain")
    plain = Record("c0", 0, "enqueue", "x", 0, 1)
    assert plain.phase is None
    assert "phase" not in record_to_json(plain)
    assert record_to_json(drain)["phase"] == "drain"
    buf = io.StringIO()
    write_jsonl([plain, drain], buf)
    assert read_jsonl(io.StringIO(buf.getvalue())) == [plain, drain]
    assert record_from_json({**GOOD, "phase": None}).phase is None
    assert drain.describe() == "c4#0 dequeue -> empty [1, 2] ord=5 phase=drain"


@pytest.mark.parametrize("phase", [3, "", ["drain"], True])
def test_a_bad_phase_is_named(phase: object) -> None:
    with pytest.raises(HistoryError, match="'phase'"):
        record_from_json({**GOOD, "phase": phase})


def test_the_queue_of_a_record_round_trips_and_is_checked() -> None:
    r = Record("p", 0, "enqueue", "a", 0.0, 1.0, 1, 0, None, "jobs")
    assert record_from_json(record_to_json(r)) == r
    assert "queue" not in record_to_json(attrs.evolve(r, queue=None))
    for bad in ("", 3):
        with pytest.raises(HistoryError, match="field 'queue'"):
            record_from_json({**record_to_json(r), "queue": bad})
