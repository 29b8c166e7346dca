"""``skueue sim``: run the protocol in a simulator and print a JSON summary."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from skueue.check.checker import check
from skueue.check.history import Record, write_jsonl
from skueue.cli.args import fail, non_negative_int, positive_int, ratio
from skueue.cli.output import AtomicOutput
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.rounds import SimStuck, SyncConfig, SyncSim


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sim",
        help="simulate a cluster (synchronous rounds or adversarial async schedule)",
        description="Run the pure protocol core in a simulator and print a JSON summary.",
    )
    p.add_argument(
        "--processes", "-n", type=positive_int, required=True, help="number of processes"
    )
    p.add_argument(
        "--structure", choices=["queue", "stack"], default="queue", help="what is simulated"
    )
    p.add_argument(
        "--schedule",
        choices=["sync", "async"],
        default="sync",
        help="synchronous rounds (the paper's model) or an adversarial asynchronous schedule",
    )
    p.add_argument(
        "--rounds",
        type=non_negative_int,
        default=1000,
        help="rounds that create requests (async: rounds x rate operations)",
    )
    p.add_argument("--rate", type=non_negative_int, default=10, help="requests per round")
    p.add_argument(
        "--enqueue-ratio",
        "--push-ratio",
        dest="ratio",
        type=ratio,
        default=0.5,
        help="fraction of requests that enqueue (push)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument(
        "--history", metavar="FILE", help="write the history as JSON Lines at the end of the run"
    )
    p.add_argument("-f", "--force", action="store_true", help="replace an existing --history file")
    p.set_defaults(run=run)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def latency_summary(records: list[Record]) -> dict[str, float]:
    lat = sorted(float(r.response) - float(r.invoke) for r in records)
    return {
        "mean": round(statistics.fmean(lat), 3) if lat else 0.0,
        "p50": percentile(lat, 0.50),
        "p99": percentile(lat, 0.99),
    }


def run(args: argparse.Namespace) -> int:
    structure = Structure(args.structure)
    # Claimed before the run so that a bad path fails at once, not after it; written at
    # the end, so that an interrupted run leaves an earlier file as it was.
    history = AtomicOutput("skueue sim", args.history, force=args.force) if args.history else None
    try:
        return simulate(args, structure, history)
    finally:
        if history is not None:
            history.discard()


def simulate(args: argparse.Namespace, structure: Structure, history: AtomicOutput | None) -> int:
    summary: dict[str, Any] = {
        "processes": args.processes,
        "structure": structure.value,
        "schedule": args.schedule,
        "seed": args.seed,
    }
    try:
        if args.schedule == "sync":
            result = SyncSim(
                SyncConfig(
                    processes=args.processes,
                    structure=structure,
                    rounds=args.rounds,
                    rate=args.rate,
                    insert_ratio=args.ratio,
                    seed=args.seed,
                )
            ).run()
            records = result.records
            summary |= {
                "requests": len(records),
                "rounds_per_request": latency_summary(records),
                "rounds_run": result.rounds_run,
                "tree_height": result.tree_height,
                "max_batch_length": result.largest_batch,
                "messages_per_request": round(result.network_messages / max(1, len(records)), 3),
                "dht_entries_per_process": {
                    "min": min(result.entries_per_process),
                    "mean": round(statistics.fmean(result.entries_per_process), 3),
                    "max": max(result.entries_per_process),
                },
            }
        else:
            aresult = AsyncSim(
                AsyncConfig(
                    processes=args.processes,
                    structure=structure,
                    operations=args.rounds * args.rate,
                    insert_ratio=args.ratio,
                    seed=args.seed,
                )
            ).run()
            records = aresult.records
            summary |= {
                "requests": len(records),
                "steps_per_request": latency_summary(records),
                "steps_run": aresult.steps,
                "messages_per_request": round(aresult.messages / max(1, len(records)), 3),
                "drained_elements": len(aresult.drained),
            }
    except SimStuck as stuck:
        fail("skueue sim", str(stuck), code=1)
    verdict = check(records, model="linearizable")
    summary["linearizable"] = verdict.ok
    if not verdict.ok:
        summary["violation"] = verdict.reason
    if history is not None:
        history.commit(lambda f: write_jsonl(records, f))
    json.dump(summary, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if verdict.ok else 1
