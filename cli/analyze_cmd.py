"""``skueue analyze``: histories and daemon logs through the Spark pipeline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from skueue.cli.args import fail, require_spark_extra

PROG = "skueue analyze"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "analyze",
        help="check and summarise histories and daemon logs on Spark",
        description="Read history files (JSON Lines) and daemon logs (structlog JSON) into "
        "Spark; write Parquet tables, PNG plots and report.md with the consistency verdict, "
        "throughput, latency percentiles and storage per process.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="history or log files, directories or globs (local or on shared "
                   "storage: hdfs://, s3a://, ...)")
    p.add_argument("--master", default=None,
                   help="local[*], spark://HOST:PORT or sc://HOST:PORT (Spark Connect); "
                   "default: $SPARK_REMOTE, else spark-submit's master, else local[*]")
    p.add_argument("--out", default="skueue-analysis", type=Path, metavar="DIR",
                   help="output directory (default ./skueue-analysis)")
    p.add_argument("--per-file", action="store_true",
                   help="each file is its own history (default: all records are one history)")
    p.add_argument("--drained", action="store_true",
                   help="the run ended empty (as `skueue bench` does): flag lost elements")
    p.add_argument("--members", default=None, metavar="ID,...",
                   help="the cluster's process ids, for storage per process (default: the "
                   "daemons in the logs, else the history's processes)")
    p.add_argument("--time-unit", choices=["auto", "rounds", "seconds"], default="auto",
                   help="unit of invoke/response (default: rounds if all are whole numbers)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE",
                   help="extra Spark setting, e.g. spark.driver.memory=4g (repeatable)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    require_spark_extra(PROG)
    # Imported here: pyspark is heavy, and other commands never need it.
    from skueue.analysis.pipeline import analyze
    from skueue.analysis.readers import InputError, check_paths
    from skueue.analysis.result import Options
    from skueue.analysis.session import (
        SHUFFLE_PARTITIONS,
        MasterError,
        parse_conf,
        plan_master,
        started_session,
    )

    try:
        check_paths(args.paths)
        plan_master(args.master)  # an unknown master fails here, before a JVM starts
        conf = parse_conf(args.conf)
    except (InputError, MasterError, ValueError) as e:
        fail(PROG, str(e))
    members = tuple(m.strip() for m in (args.members or "").split(",") if m.strip())
    options = Options(tuple(args.paths), args.out, args.per_file, args.drained, members,
                      args.time_unit, partitions_fixed=SHUFFLE_PARTITIONS in conf)

    def progress(step: str) -> None:
        print(f"{PROG}: {step}", file=sys.stderr, flush=True)

    with started_session(args.master, app_name=PROG, conf=conf) as session:
        try:
            result = analyze(session.spark, options, master=session.master,
                             progress=progress)
        except InputError as e:
            fail(PROG, str(e))
        except Exception as e:  # a missing remote path surfaces as one of Spark's errors
            if "PATH_NOT_FOUND" in str(e) or "Path does not exist" in str(e):
                fail(PROG, f"input path not found: {str(e).splitlines()[0]}")
            raise
    for c in result.checks:
        if c.problem is not None:
            print(f"{c.label}: not checkable: {c.problem}")
            continue
        for model in ("linearizable", "sc"):
            print(f"{c.label}: {c.verdicts[model].describe()}")
    for r in result.pei:
        where = r["name"] + (f", queue {r['queue']}" if r["queue"] else "")
        if r["note"] is not None:
            print(f"{where}: PEI {r['note']}")
        elif r["count"]:
            print(f"{where}: PEI ({r['method']}) over {r['count']} dequeues: median "
                  f"{r['median']:g}, mean {r['mean']:g}, p90 {r['p90']:g}, p99 {r['p99']:g}, "
                  f"max {r['max']}")
    print(f"{result.records} records, {result.malformed_lines} malformed line(s); "
          f"report: {args.out / 'report.md'}")
    return 0 if result.ok else 1
