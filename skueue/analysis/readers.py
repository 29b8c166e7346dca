"""Input files to DataFrames: history records, daemon log events, lease events, malformed
lines.

Theory of operation
-------------------
Every input is read as text, one row per line, with the file it came from, so history
files and structlog JSON logs may be mixed freely (also compressed: Spark's text source
decompresses ``.gz`` and ``.bz2``).  Blank lines are skipped, as
:func:`skueue.check.history.read_jsonl` skips them.  Each other line is exactly one of:

- a **log event**: a JSON object with an ``event`` key and no ``op``;
- a **history record**: valid by the rules of :func:`skueue.check.history.record_from_json`;
- **malformed**: anything else; counted per file and kept with a reason, never a crash.

Parsing is native (no Python on the executors): one ``from_json`` pass with a typed
schema.  A field of the wrong type makes Spark fill ``_corrupt_record``; the two string
fields are parsed as VARIANT because Spark's JSON reader would quietly turn ``5`` into
``"5"`` for a string column, which the strict Python reader rejects.  A line that
``from_json`` accepts only up to trailing text is caught by insisting that it ends in
``}``.  Only malformed lines, normally few, are parsed a second time (fully, as VARIANT)
to name the reason the way ``record_from_json`` does.

The optional ``phase`` (``"drain"`` on the records of ``skueue bench``'s final drain)
is kept when it is a string and read as absent otherwise.  The optional ``queue`` (a
named queue) and ``priority`` (an enqueue's level) are held to ``record_from_json``'s
rules: a non-empty string; a non-negative integer on an enqueue only.

Known differences from the Python reader, all on lines no writer of ours produces: an
integer beyond 64 bits is malformed here; a line with a duplicate key is malformed here
(Python keeps the last value); ``{...} {...}`` on one line passes here.

The daemon writes no msgpack histories (``skueue bench --history`` writes JSON Lines), so
there is no binary reader; a binary file shows up as malformed lines.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Final

import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from skueue.analysis.leases import is_lease_event, leases_of
from skueue.check.history import INSERT_OPS, OPS, REMOVE_OPS

HISTORY_SCHEMA: Final = (
    "process variant, seq bigint, op string, value variant, invoke double, "
    "response double, position bigint, ord bigint, phase variant, queue variant, "
    "priority variant, event string, consumer string, _corrupt_record string"
)
_INT_TYPES: Final = ("TINYINT", "SMALLINT", "INT", "BIGINT")
TEXT_SHOWN_MAX: Final = 200
"""Characters of a malformed line kept in the table and the report."""


class InputError(ValueError):
    """The input cannot be analysed at all (missing or empty path): one clear line."""


@attrs.frozen
class Inputs:
    """What the files hold; every DataFrame is lazy."""

    records: DataFrame
    """``hid, file, process, seq, op, value, invoke, response, position, ord, phase, queue,
    priority``."""
    events: DataFrame
    """``file, daemon, timestamp, level, event, fields`` (fields: map of all keys as text)."""
    malformed: DataFrame
    """``file, reason, text`` (text cut to :data:`TEXT_SHOWN_MAX` characters)."""
    names: dict[int, str]
    """History id -> a name for the report: ``history`` or the file's path."""
    leases: DataFrame | None = None
    """Lease events (:mod:`skueue.analysis.leases`): ``consumer, event, invoke, ...``."""


# -- paths ------------------------------------------------------------------------------


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _has_data(directory: str) -> bool:
    for root, dirs, files in os.walk(directory):
        # Spark skips names starting with '_' or '.', e.g. _SUCCESS and .crc files.
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in files:
            if not name.startswith(("_", ".")) and os.path.getsize(os.path.join(root, name)):
                return True
    return False


def check_paths(paths: Sequence[str]) -> None:
    """Fail early, with one line, on a missing or empty local path.

    Remote paths (``hdfs://``, ``s3a://``...) are left to Spark; an input that holds no
    line at all is caught after reading (:func:`load`).
    """
    if not paths:
        raise InputError("no input paths given")
    for path in paths:
        if not _is_local(path):
            continue
        local = path.removeprefix("file://")
        matches = glob.glob(local) if glob.has_magic(local) else [local]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise InputError(f"{path}: no such file or directory")
        if not any(os.path.isdir(m) and _has_data(m) or os.path.isfile(m) and os.path.getsize(m)
                   for m in matches):
            raise InputError(f"{path}: empty (no lines to analyse)")


# -- lines ------------------------------------------------------------------------------


def _is_string(v: Column) -> Column:
    return F.schema_of_variant(v) == "STRING"


def _finite(c: Column) -> Column:
    return c.isNotNull() & ~F.isnan(c) & (F.abs(c) != float("inf"))


def valid_record(j: Column, text: Column) -> Column:
    """True iff the parsed line ``j`` is a record ``record_from_json`` would accept."""
    value_type = F.schema_of_variant(j["value"])
    return (
        j["_corrupt_record"].isNull()
        # from_json stops after the first object: trailing text must not slip through.
        & F.rtrim(text).endswith("}")
        & _is_string(j["process"])
        & (F.length(F.variant_get(j["process"], "$", "string")) > 0)
        & (j["seq"] >= 0)
        & j["op"].isin(*sorted(OPS))
        & j["value"].isNotNull()
        & F.when(j["op"].isin(*sorted(INSERT_OPS)), value_type == "STRING").otherwise(
            value_type.isin("STRING", "VOID")
        )
        & _finite(j["invoke"])
        & _finite(j["response"])
        & (j["response"] >= j["invoke"])
        & _optional_fields_valid(j)
    )


def _optional_fields_valid(j: Column) -> Column:
    """``queue``: absent, null or a non-empty string; ``priority``: absent, null or an
    integer >= 0 on an enqueue (a variant, so ``true`` or ``1.5`` is not read as a number)."""
    queue_type = F.schema_of_variant(j["queue"])
    priority_type = F.schema_of_variant(j["priority"])
    queue_ok = (
        j["queue"].isNull() | (queue_type == "VOID")
        | ((queue_type == "STRING") & (F.length(F.variant_get(j["queue"], "$", "string")) > 0))
    )
    priority_ok = (
        j["priority"].isNull() | (priority_type == "VOID")
        | (priority_type.isin(*_INT_TYPES) & (j["op"] == "enqueue")
           & (F.variant_get(j["priority"], "$", "bigint") >= 0))
    )
    return queue_ok & priority_ok


def _reason_sql(text: str) -> str:
    """A SQL expression naming why the line ``text`` is not a record (see record_from_json)."""
    v = f"try_parse_json({text})"

    def typ(field: str) -> str:
        return f"schema_of_variant(variant_get({v}, '$.{field}'))"

    def missing(field: str) -> str:
        return f"variant_get({v}, '$.{field}') IS NULL"

    ints = ", ".join(f"'{t}'" for t in _INT_TYPES)

    def numeric(field: str) -> str:
        return f"({typ(field)} IN ({ints}, 'DOUBLE', 'FLOAT') OR {typ(field)} LIKE 'DECIMAL%')"

    ops = ", ".join(f"'{o}'" for o in sorted(OPS))
    inserts = ", ".join(f"'{o}'" for o in sorted(INSERT_OPS))
    removes = ", ".join(f"'{o}'" for o in sorted(REMOVE_OPS))
    op = f"variant_get({v}, '$.op', 'string')"
    when = [
        (f"{v} IS NULL", "invalid JSON"),
        (f"NOT startswith(schema_of_variant({v}), 'OBJECT')", "record must be a JSON object"),
    ]
    when += [
        (missing(f), f"missing field '{f}'")
        for f in ("process", "seq", "op", "value", "invoke", "response")
    ]
    when += [
        (
            f"{typ('process')} != 'STRING' OR variant_get({v}, '$.process', 'string') = ''",
            "field 'process' must be a non-empty string",
        ),
        (
            f"{typ('seq')} NOT IN ({ints}) OR variant_get({v}, '$.seq', 'bigint') < 0",
            "field 'seq' must be a non-negative integer",
        ),
        (f"{typ('op')} != 'STRING' OR {op} NOT IN ({ops})",
         f"field 'op' must be one of {sorted(OPS)}"),
        (f"{op} IN ({inserts}) AND {typ('value')} != 'STRING'",
         "field 'value' of an insert must be a string"),
        (f"{op} IN ({removes}) AND {typ('value')} NOT IN ('STRING', 'VOID')",
         "field 'value' of a removal must be a string or null"),
    ]
    for f in ("invoke", "response"):
        # NaN sorts above infinity in Spark, so one comparison rules out both.
        finite = f"abs(try_variant_get({v}, '$.{f}', 'double')) < double('Infinity')"
        when.append(
            (f"NOT {numeric(f)} OR NOT {finite}", f"field '{f}' must be a finite number")
        )
    when.append((
        f"variant_get({v}, '$.response', 'double') < variant_get({v}, '$.invoke', 'double')",
        "field 'response' is before 'invoke'",
    ))
    for f in ("position", "ord", "priority"):
        when.append((
            f"NOT ({missing(f)} OR {typ(f)} IN ({ints}, 'VOID'))",
            f"field '{f}' must be an integer or null",
        ))
    when.append((
        f"{typ('priority')} IN ({ints}) AND ({op} != 'enqueue' OR "
        f"variant_get({v}, '$.priority', 'bigint') < 0)",
        "field 'priority' belongs to an enqueue and is not negative",
    ))
    when.append((
        f"NOT ({missing('queue')} OR {typ('queue')} = 'VOID' OR ({typ('queue')} = 'STRING' "
        f"AND variant_get({v}, '$.queue', 'string') != ''))",
        "field 'queue' must be a non-empty string or null",
    ))
    when.append((f"NOT endswith(rtrim({text}), '}}')", "invalid JSON: extra data after the object"))
    cases = " ".join(f'WHEN {cond} THEN "{why}"' for cond, why in when)
    return f'CASE {cases} ELSE "not a finite, well-formed record" END'


def read_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """``file, text`` for every non-blank line under ``paths``."""
    raw = spark.read.option("recursiveFileLookup", "true").text(list(paths))
    return raw.select(
        F.col("_metadata.file_path").alias("file"), F.col("value").alias("text")
    ).where(F.trim("text") != "")


def classify(lines: DataFrame) -> DataFrame:
    """One row per line: ``kind`` (record/event/malformed) and the fields of a record.

    ``text`` is kept for events (parsed later, they are few) and malformed lines; a
    malformed line also gets its ``reason``, computed for those rows only.
    """
    j = F.from_json("text", HISTORY_SCHEMA)
    parsed = lines.select("file", "text", j.alias("j"))
    pj = parsed["j"]
    kind = (
        F.when(is_lease_event(pj), "lease")
        .when(pj["event"].isNotNull() & pj["op"].isNull(), "event")
        .when(valid_record(pj, F.col("text")), "record")
        .otherwise("malformed")
    )
    parsed = parsed.withColumn("kind", kind)
    record = F.col("kind") == "record"
    j = F.col("j")
    return parsed.select(
        "kind",
        "file",
        F.when(record, F.variant_get(j["process"], "$", "string")).alias("process"),
        F.when(record, j["seq"]).alias("seq"),
        F.when(record, j["op"]).alias("op"),
        F.when(record & (F.schema_of_variant(j["value"]) == "STRING"),
               F.variant_get(j["value"], "$", "string")).alias("value"),
        F.when(record, j["invoke"]).alias("invoke"),
        F.when(record, j["response"]).alias("response"),
        F.when(record, j["position"]).alias("position"),
        F.when(record, j["ord"]).alias("ord"),
        # Optional (absent in older histories): e.g. "drain" for a bench's final drain.
        F.when(record & (F.schema_of_variant(j["phase"]) == "STRING"),
               F.variant_get(j["phase"], "$", "string")).alias("phase"),
        F.when(record & (F.schema_of_variant(j["queue"]) == "STRING"),
               F.variant_get(j["queue"], "$", "string")).alias("queue"),
        # Level 0 is read as absent, as record_from_json reads it.
        F.when(record & F.schema_of_variant(j["priority"]).isin(*_INT_TYPES)
               & (F.variant_get(j["priority"], "$", "bigint") > 0),
               F.variant_get(j["priority"], "$", "bigint")).alias("priority"),
        F.when(F.col("kind").isin("event", "lease"), F.col("text"))
        .when(F.col("kind") == "malformed", F.substring("text", 1, TEXT_SHOWN_MAX))
        .alias("text"),
        F.when(F.col("kind") == "malformed", F.expr(_reason_sql("text"))).alias("reason"),
    )


def stage(spark: SparkSession, paths: Sequence[str], directory: str) -> None:
    """Parse every line under ``paths`` once, into Parquet at ``directory`` (by ``kind``).

    Everything downstream reads this table, so the text is parsed exactly once however
    many tables and checks follow.
    """
    lines = read_lines(spark, paths)
    classify(lines).write.mode("overwrite").partitionBy("kind").parquet(directory)


def load(spark: SparkSession, directory: str, *, per_file: bool = False) -> Inputs:
    """The tables of a :func:`stage` directory.

    With ``per_file`` every file is its own history (ids by sorted path); otherwise all
    records form one history (id 0), as per-client files of one run would.
    """
    lines = spark.read.parquet(directory)
    if "kind" not in lines.columns:
        raise InputError("no input lines at all")
    records = lines.where(F.col("kind") == "record").drop("kind", "text", "reason")
    names = {0: "history"}
    hid: Column = F.lit(0)
    if per_file:
        files = sorted(r["file"] for r in records.select("file").distinct().collect())
        names = dict(enumerate(files))
        if files:
            ids = F.create_map(*[x for i, f in enumerate(files) for x in (F.lit(f), F.lit(i))])
            hid = ids[F.col("file")]
    records = records.select(hid.cast("int").alias("hid"), *records.columns)
    malformed = lines.where(F.col("kind") == "malformed").select("file", "reason", "text")
    events = events_of(lines.where(F.col("kind") == "event").select("file", "text"))
    leases = leases_of(lines.where(F.col("kind") == "lease").select("file", "text"))
    return Inputs(records, events, malformed, names, leases)


def events_of(event_lines: DataFrame) -> DataFrame:
    """Log events (``file, text``) with their daemon: the ``process`` of the file's ``ready``."""
    m = F.from_json("text", "map<string,string>")
    events = event_lines.select("file", m.alias("fields"))
    events = events.select(
        "file",
        F.try_to_timestamp(F.col("fields")["timestamp"]).alias("timestamp"),
        F.col("fields")["level"].alias("level"),
        F.col("fields")["event"].alias("event"),
        "fields",
    )
    daemons = (
        events.where((F.col("event") == "ready") & F.col("fields")["process"].isNotNull())
        .groupBy("file")
        .agg(F.min(F.col("fields")["process"]).alias("daemon"))
    )
    return events.join(daemons, "file", "left").select(
        "file", "daemon", "timestamp", "level", "event", "fields"
    )


def line_counts(spark: SparkSession, directory: str) -> dict[str, dict[str, int]]:
    """``{file: {"record": n, "event": n, "lease": n, "malformed": n}}`` of a
    :func:`stage` directory."""
    lines = spark.read.parquet(directory)
    out: dict[str, dict[str, int]] = {}
    if "kind" not in lines.columns:
        return out
    for row in lines.groupBy("file", "kind").count().collect():
        counts = out.setdefault(
            row["file"], {"record": 0, "event": 0, "lease": 0, "malformed": 0}
        )
        counts[row["kind"]] = int(row["count"])
    return out
