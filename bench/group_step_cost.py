"""What the replication group costs an owner step (docs/replication.md §11, stage 2a).

A durable daemon's owner logs each step's inputs through its one-voter group
(runtime/group.py): proposed as entries, written, synced, committed.  This measures,
in one run, a step of ``--records`` logged records through the group against the same
records written straight to the same kind of log (what the owner did before stage 2a),
on a log in /dev/shm with ``--fsync never``, so that only the CPU is measured.

    .venv/bin/python bench/group_step_cost.py [--steps 20000] [--records 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from skueue.replication.config import Config
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.group import ProcessGroup

RECORD = ["client", 1, "session", ["i", 5, [b"x" * 100], None, 0]]  # a client request's shape
ROUNDS = 5


def fresh_log(root: Path, name: str) -> InputLog:
    return InputLog.open(root / name, Meta("p1", "nonce", "queue", ()), SyncPolicy("never"))


def best_us(step: Callable[[], None], steps: int) -> float:
    """The best of ``ROUNDS`` rounds, in microseconds a step (the least disturbed)."""
    best = float("inf")
    for _ in range(ROUNDS):
        began = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - began) / steps * 1e6)
    return best


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=1, help="logged records a step")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        root = Path(tmp)
        plain = fresh_log(root, "plain")

        def plain_step() -> None:
            for _ in range(args.records):
                plain._buffer(RECORD)
            plain.sync(0.0)

        group = ProcessGroup("p1", fresh_log(root, "group"), Config.of(["p1"]))
        group.take_over(0.0)

        def group_step() -> None:
            for _ in range(args.records):
                group.stage(RECORD)
            group.end_step(0.0)

        without = best_us(plain_step, args.steps)
        with_group = best_us(group_step, args.steps)
        committed = group.node.commit
    print(f"command: .venv/bin/python bench/group_step_cost.py --steps {args.steps} "
          f"--records {args.records}")
    print(f"{args.records} logged record(s) a step, best of {ROUNDS} rounds of {args.steps}:")
    print(f"  log alone        {without:6.1f} us a step")
    print(f"  through a group  {with_group:6.1f} us a step  "
          f"(+{with_group - without:.1f} us, {with_group / without:.1f}x)")  # fmt: skip
    return {"log_alone_us": without, "group_us": with_group, "committed": committed}


if __name__ == "__main__":
    # The group's "leads" line is not the figures (set here only: tests import main).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    main()
