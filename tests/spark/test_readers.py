"""Reading: strict records exactly as ``record_from_json`` accepts them, malformed lines
counted with a reason (never a crash), log events recognised, bad paths one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from skueue.analysis.readers import InputError, check_paths, line_counts, load, stage
from skueue.check.history import HistoryError, record_from_json

GOOD = {"process": "A", "seq": 0, "op": "enqueue", "value": "x", "invoke": 0, "response": 1.5}


def _with(**changes: object) -> str:
    d = dict(GOOD)
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k)
        else:
            d[k] = v
    return json.dumps(d)


_DROP = object()

# Each line goes to its own file, so per-file counts say how each line was classified.
LINES = {
    "good": _with(),
    "good-removal-empty": _with(op="dequeue", value=None, position=3, ord=7),
    "good-float-times": _with(invoke=0.25, response=0.25),
    "good-extra-key": _with(note="ignored"),
    "good-phase-drain": _with(op="dequeue", value="x", phase="drain"),
    "good-stack": _with(op="pop", value="y"),
    "not-json": "enqueue x",
    "array": "[1, 2]",
    "scalar": '"record"',
    "trailing": _with() + " trailing",
    "no-process": _with(process=_DROP),
    "no-value": _with(value=_DROP),
    "empty-process": _with(process=""),
    "numeric-process": _with(process=7),
    "seq-string": _with(seq="1"),
    "seq-float": _with(seq=1.0),
    "seq-bool": _with(seq=True),
    "seq-negative": _with(seq=-1),
    "bad-op": _with(op="peek"),
    "insert-null-value": _with(value=None),
    "numeric-value": _with(op="dequeue", value=5),
    "time-string": _with(invoke="0"),
    "time-nan": '{"process": "A", "seq": 0, "op": "enqueue", "value": "x", "invoke": NaN, '
                '"response": 1}',
    "time-infinite": _with(response=1e400),
    "response-first": _with(invoke=2, response=1),
    "ord-float": _with(ord=1.5),
    "position-string": _with(position="3"),
    "good-priority": _with(priority=3, queue="jobs", ord=2),
    "good-priority-zero": _with(priority=0),
    "good-priority-null-on-dequeue": _with(op="dequeue", value=None, priority=None),
    "good-queue-null": _with(queue=None),
    "priority-on-dequeue": _with(op="dequeue", value="x", priority=1),
    "priority-zero-on-dequeue": _with(op="dequeue", value=None, priority=0),
    "priority-negative": _with(priority=-1),
    "priority-float": _with(priority=1.0),
    "priority-bool": _with(priority=True),
    "priority-string": _with(priority="1"),
    "queue-empty": _with(queue=""),
    "queue-number": _with(queue=3),
}


def _python_accepts(line: str) -> bool:
    try:
        record_from_json(json.loads(line))
    except (HistoryError, ValueError):
        return False
    return True


@pytest.fixture(scope="module")
def staged(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    src = tmp_path_factory.mktemp("lines")
    for name, line in LINES.items():
        (src / f"{name}.jsonl").write_text(f"\n  \n{line}\n", encoding="utf-8")  # blanks skipped
    (src / "daemon.log").write_text(
        '{"process": "n1", "members": 2, "event": "ready", "level": "info", '
        '"timestamp": "2026-01-01T00:00:00Z"}\n'
        '{"event": "batch sent", "batch_size": 12, "level": "debug", '
        '"timestamp": "2026-01-01T00:00:01.5Z"}\n'
        "skueued: SIGTERM, shutting down\n",
        encoding="utf-8",
    )
    out = tmp_path_factory.mktemp("staged") / "lines"
    stage(spark, [str(src)], str(out))
    return src, out


@pytest.mark.spark
def test_records_are_exactly_what_the_python_reader_accepts(
    spark: SparkSession, staged: tuple[Path, Path]
) -> None:
    _, out = staged
    counts = {Path(f).stem: c for f, c in line_counts(spark, str(out)).items()}
    for name, line in LINES.items():
        expected = "record" if _python_accepts(line) else "malformed"
        got = [k for k, n in counts[name].items() if n]
        assert got == [expected], f"{name}: {line!r} classified {got}, Python says {expected}"


@pytest.mark.spark
def test_malformed_lines_name_their_reason(spark: SparkSession, staged: tuple[Path, Path]) -> None:
    _, out = staged
    reasons = {
        Path(r["file"]).stem: r["reason"]
        for r in load(spark, str(out)).malformed.collect()
    }
    assert reasons["not-json"] == "invalid JSON"
    assert reasons["array"] == "record must be a JSON object"
    assert reasons["no-value"] == "missing field 'value'"
    assert reasons["seq-float"] == "field 'seq' must be a non-negative integer"
    assert reasons["numeric-process"] == "field 'process' must be a non-empty string"
    assert reasons["time-nan"] == "invalid JSON"  # strict JSON has no NaN
    assert reasons["response-first"] == "field 'response' is before 'invoke'"
    assert reasons["ord-float"] == "field 'ord' must be an integer or null"
    assert reasons["daemon"] == "invalid JSON"
    assert reasons["priority-float"] == "field 'priority' must be an integer or null"
    for name in ("priority-on-dequeue", "priority-zero-on-dequeue", "priority-negative"):
        assert reasons[name] == "field 'priority' belongs to an enqueue and is not negative"
    assert reasons["queue-number"] == "field 'queue' must be a non-empty string or null"
    assert reasons["queue-empty"] == "field 'queue' must be a non-empty string or null"


@pytest.mark.spark
def test_records_and_events_keep_their_fields(
    spark: SparkSession, staged: tuple[Path, Path]
) -> None:
    _, out = staged
    inputs = load(spark, str(out), per_file=True)
    rows = {r["file"].rsplit("/", 1)[-1]: r for r in inputs.records.collect()}
    empty = rows["good-removal-empty.jsonl"]
    assert (empty["op"], empty["value"], empty["position"], empty["ord"]) == (
        "dequeue", None, 3, 7)
    assert rows["good.jsonl"]["response"] == 1.5
    assert rows["good-phase-drain.jsonl"]["phase"] == "drain"  # optional: a bench's drain
    assert rows["good.jsonl"]["phase"] is None
    prioritized = rows["good-priority.jsonl"]
    assert (prioritized["queue"], prioritized["priority"], prioritized["ord"]) == ("jobs", 3, 2)
    assert rows["good-priority-zero.jsonl"]["priority"] is None  # level 0, as Record reads it
    assert rows["good.jsonl"]["queue"] is None
    assert len(set(inputs.names)) == len(rows)  # one history per file
    events = {r["event"]: r for r in inputs.events.collect()}
    assert set(events) == {"ready", "batch sent"}
    assert events["batch sent"]["daemon"] == "n1"  # from the file's ready event
    assert events["batch sent"]["fields"]["batch_size"] == "12"


def test_missing_and_empty_paths_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        check_paths([str(tmp_path / "nope.jsonl")])
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        check_paths([str(tmp_path / "empty.jsonl")])
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="empty"):
        check_paths([str(tmp_path / "dir")])
    with pytest.raises(InputError, match="no such file"):
        check_paths([str(tmp_path / "*.nothing")])
    check_paths(["hdfs://cluster/histories"])  # remote paths are Spark's to check
