"""A cost model for scale beyond this machine (issue 10): messages and bytes per operation
per process as ``n`` grows, and the throughput of ``n`` one-core hosts it projects.

Rerun the numbers in the README (and after any change to the core)::

    .venv/bin/python bench/cost_model.py
    .venv/bin/python bench/cost_model.py --cpu-us-per-message 35 --cpu-us-per-op-local 40
    .venv/bin/python bench/cost_model.py --n 16 64 --ops-per-process 8 --cycles 20
    .venv/bin/python bench/cost_model.py --n 4 16 64 --ops-per-process 200 --grouped

Theory of operation
-------------------
A cluster of ``n`` processes (queue, static ring, the simulator's ``build_cluster``) runs a
closed-loop steady load in synchronous rounds, exactly as :mod:`skueue.sim.rounds` does:
each round every message sent in the previous round is handled, then every process that
may act ticks.  A *cycle* starts with every process submitting ``--ops-per-process``
operations (half enqueues, half dequeues, shuffled by the seed) and ends in the round the
last of them completes; the next cycle starts at once, like clients that wait for their
answers.  The first ``--warmup-cycles`` are not counted; messages in flight across the
edges of the counted window roughly cancel (as many arrive from the warm-up as leave
after it).

Every ``Send`` effect a process returns is a message that crosses processes (the core
delivers messages between a process's own three virtual nodes inside the process, for
free).  Each is counted per kind, per sending and per receiving process, with its bytes
on the wire as a daemon frames it: a 4-byte length header and the msgpack of
``["msg", to_kind, encode_message(m)]`` (``host/host.py``, ``wire/framing.py``; one
frame per message, no TCP/IP overhead counted).

Definitions (``ops`` = operations completed in the counted window, ``M`` = messages):

- messages per op: ``M / ops`` (the whole cluster's traffic per operation);
- a process's work per op: (messages it sends + messages it receives) / ops; averaged
  over the processes this is ``2 M / (n ops)``;
- share: a process's sent + received divided by ``2 M`` (all message ends), so shares sum
  to 1 and an even spread gives every process ``1 / n``; the busiest process's share,
  and its ratio to ``1 / n``, say how fair the load is.

Projection (a model, not a measurement): a host with one core is saturated when its CPU
per cluster operation reaches one second per second.  The busiest process spends
``busiest_msgs_per_op * cpu_us_per_message + cpu_us_per_op_local / n`` µs per cluster
operation (its clients issue ``1 / n`` of the operations, and each costs the request and
reply handling of ``--cpu-us-per-op-local``), so the cluster's throughput is
``1e6 / that``; the ideal process (the average) gives the upper bound if the load were
perfectly even.  ``--cpu-us-per-message`` is the CPU one process spends per message *end*
(one send or one receive); a figure measured as cluster CPU / messages crossing counts
both ends and must be halved first.  Left out: network latency and bandwidth, the
rounds a cycle takes (closed-loop clients wait ``rounds per cycle`` round trips, so
their number, not the CPU, may bound throughput), frames coalesced per peer, idle
pacing, membership changes, and any cost that grows with a process's memory.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from cost_model_measure import measure  # noqa: E402
from cost_model_output import markdown, write_outputs  # noqa: E402
from cost_model_points import Point, project  # noqa: E402

RESULTS = BENCH / "results"
DEFAULT_N = (16, 64, 256, 1024, 4096)
QUICK_N = (4, 8, 16)
CPU_US_PER_MESSAGE = 60.0
CPU_US_PER_OP_LOCAL = 40.0
# Counted cycles per n when --cycles is not given: about this many operations, within
# the bounds (a big n has many operations in each cycle; a small one needs cycles to
# average over the tree's phases).
# The busiest process is a maximum over n noisy counts, biased upward when each process
# sees few messages, so even n = 4096 gets a dozen cycles (about 90 s on this 2-core
# machine, the whole default run about two minutes).
OPS_TARGET = 16_384
CYCLES_MIN, CYCLES_MAX = 12, 40
QUICK_CYCLES = 4


def default_cycles(n: int, ops_per_process: int) -> int:
    return max(CYCLES_MIN, min(CYCLES_MAX, round(OPS_TARGET / (n * ops_per_process))))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=None,
                        help=f"cluster sizes (default {' '.join(map(str, DEFAULT_N))})")
    parser.add_argument("--ops-per-process", type=int, default=2,
                        help="operations each process submits per cycle, half enqueues "
                        "(default 2)")
    parser.add_argument("--cycles", type=int, default=None,
                        help=f"counted cycles per n (default: about {OPS_TARGET} operations, "
                        f"{CYCLES_MIN} to {CYCLES_MAX} cycles)")
    parser.add_argument("--grouped", action="store_true",
                        help="each process submits its enqueues, then its dequeues, as one "
                        "enqueue_many and one dequeue_many (default: shuffled)")
    parser.add_argument("--warmup-cycles", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu-us-per-message", type=float, default=CPU_US_PER_MESSAGE,
                        help="CPU per message end, sent or received (a measured figure; "
                        f"default {CPU_US_PER_MESSAGE:g})")
    parser.add_argument("--cpu-us-per-op-local", type=float, default=CPU_US_PER_OP_LOCAL,
                        help="CPU per operation that does not depend on n: the client's "
                        f"request and reply (default {CPU_US_PER_OP_LOCAL:g})")
    parser.add_argument("--quick", action="store_true",
                        help=f"n {' '.join(map(str, QUICK_N))}, {QUICK_CYCLES} cycles, no files")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_model",
                        help="output stem for .csv, .json and .png")
    parser.add_argument("--no-files", action="store_true", help="print the table only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ns = args.n or (QUICK_N if args.quick else DEFAULT_N)
    points: list[Point] = []
    for n in ns:
        cycles = args.cycles or (QUICK_CYCLES if args.quick else
                                 default_cycles(n, args.ops_per_process))
        point = measure(n, ops_per_process=args.ops_per_process, cycles=cycles,
                        warmup_cycles=args.warmup_cycles, seed=args.seed,
                        grouped=args.grouped)
        print(f"n={n}: {point.ops_completed} ops, {point.messages} messages, "
              f"{point.wall_seconds:.1f} s", file=sys.stderr, flush=True)
        points.append(point)
    projections = [project(p, args.cpu_us_per_message, args.cpu_us_per_op_local)
                   for p in points]
    print(markdown(points, projections))
    if not (args.quick or args.no_files):
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        for path in write_outputs(points, projections, args.out, settings):
            print(f"wrote {path}", file=sys.stderr)
    total = sum(p.wall_seconds for p in points)
    print(f"total {total:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
