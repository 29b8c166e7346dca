"""Failover (issue 31): how long the cluster stops when a member is killed, and what it
serves with one member down, with ``skueued --replicas 3 --failover``.

Each round starts ``--daemons`` durable daemons (5 by default), runs a probe client (one
enqueue at a time, with the whole seed list, through a member that survives) and kills
one daemon with SIGKILL, its data directory deleted: it never comes back.  The failover
time is from the kill to the answer of the probe's first enqueue invoked after it (every
operation goes up the tree, through the victim's process: this is detection + election
+ switch + the links moving); the election part is read from the stand-in's log
("stands in for a member").  The victims rotate over the members.

With ``--load-ops N`` the first round also measures throughput, 8 clients with seed
lists and the fault tests' mixed workload of N operations: once with every member up,
then again once the victim's process is taken over (the same load, the same cluster).
Every history is checked linearizable with every element removed exactly once.

    .venv/bin/python bench/failover.py --kills 10 --load-ops 8000 \\
        --out bench/results/failover.json

Bounded: every wait has a timeout; every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from recovery_time import Daemons  # noqa: E402

import skueue  # noqa: E402
from skueue.check.checker import check  # noqa: E402
from skueue.cluster.loadgen import LoadConfig, drain, run_workload  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "failover.json"
PROBE_TIMEOUT_S = 60.0
FAILOVER_TIMEOUT_S = 60.0
STAND_IN = re.compile(r"^(\S+) \[info\s*\] stands in for a member", re.MULTILINE)


def seed_list(addresses: list[str], first: int) -> str:
    n = len(addresses)
    return ",".join(addresses[(first + k) % n] for k in range(n))


async def probe_until_answered(seeds: str, killed: list[float], answered: list[float]) -> None:
    """Enqueue one element at a time until one invoked after the kill (``killed`` holds
    its time once it happened) is answered; its answer time goes in ``answered``."""
    async with skueue.connect(seeds, request_timeout_s=PROBE_TIMEOUT_S) as q:
        n = 0
        while True:
            invoked = time.time()
            await q.enqueue(f"probe-{n}".encode())
            n += 1
            if killed and invoked > killed[0]:
                answered.append(time.time())
                return
            await anyio.sleep(0.01)


async def one_round(daemons: Daemons, victim: int, survivor: int) -> dict[str, float]:
    killed: list[float] = []
    answered: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(probe_until_answered, seed_list(daemons.addresses, survivor), killed,
                      answered)  # fmt: skip
        await anyio.sleep(1.0)
        kill_at = time.time()
        daemons.procs[victim].send_signal(signal.SIGKILL)
        killed.append(kill_at)
        daemons.procs[victim].wait()
        with anyio.fail_after(FAILOVER_TIMEOUT_S):
            while not answered:
                await anyio.sleep(0.01)
    shutil.rmtree(daemons.root / f"data{victim}")
    elected = stand_in_time(daemons, victim)
    return {"failover_s": round(answered[0] - kill_at, 3),
            "elected_s": round(elected - kill_at, 3) if elected else None}  # type: ignore[dict-item]


def stand_in_time(daemons: Daemons, victim: int) -> float | None:
    """When a survivor logged that it stands in (the first one, as a Unix time)."""
    times = []
    for i, log in enumerate(daemons.logs):
        if i == victim:
            continue
        for stamp in STAND_IN.findall(log.read_text(errors="replace")):
            times.append(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return min(times) if times else None


async def empty(seeds: str) -> None:
    """Take the probes' elements out, so that the next load starts on an empty queue
    (its history is checked as the queue's whole)."""
    async with skueue.connect(seeds, request_timeout_s=PROBE_TIMEOUT_S) as q:
        while await q.dequeue_many(1000):
            pass


async def throughput(addresses: list[str], ops: int, seed: int) -> dict[str, float]:
    config = LoadConfig(nodes=tuple(seed_list(addresses, i) for i in range(8)), clients=8,
                        ops=ops, insert_ratio=0.55, value_bytes=32, seed=seed,
                        request_timeout_s=60.0)  # fmt: skip
    result = await run_workload(config)
    seconds = result.workload_seconds
    await drain(config, result)
    for model in ("linearizable",):
        verdict = check(result.records, model=model, method="certificate", drained=True)
        if not verdict.ok:
            raise SystemExit(f"history not {model}: {verdict.describe()}")
    removed = [r.value for r in result.records if not r.inserts and r.value]
    if len(removed) != len(set(removed)):
        raise SystemExit("an element was removed twice")
    return {"ops": ops, "seconds": round(seconds, 2), "ops_per_s": round(ops / seconds, 1)}


def start(root: Path, n: int) -> Daemons:
    daemons = Daemons(root, n, None, 3)
    extra = ("--failover",)
    for i in range(n):
        daemons.spawn(i, "first", *extra)
    for i in range(n):
        daemons.wait_ready(i)
    return daemons


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--daemons", type=int, default=5)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--load-ops", type=int, default=0, help="also measure throughput, all up "
                   "and one down, with this many operations (0: not)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    rounds: list[dict[str, object]] = []
    load: dict[str, object] = {}
    for k in range(args.kills):
        victim, survivor = k % args.daemons, (k + 1) % args.daemons
        with tempfile.TemporaryDirectory(prefix="skueue-failover-") as tmp:
            daemons = start(Path(tmp), args.daemons)
            try:
                if k == 0 and args.load_ops:
                    load["all_up"] = anyio.run(throughput, daemons.addresses, args.load_ops, 1)
                measured = anyio.run(one_round, daemons, victim, survivor)
                if k == 0 and args.load_ops:
                    alive = [a for i, a in enumerate(daemons.addresses) if i != victim]
                    anyio.run(empty, ",".join(alive))
                    load["one_down"] = anyio.run(throughput, alive, args.load_ops, 2)
            finally:
                daemons.stop()
        rounds.append({"victim": victim, **measured})
        print(f"kill {k + 1}/{args.kills}: daemon {victim}: answered again "
              f"{measured['failover_s']:.2f} s after the kill (stand-in elected "
              f"{measured['elected_s']} s after it)", flush=True)
    times = [float(r["failover_s"]) for r in rounds]  # type: ignore[arg-type]
    summary = {"p50_s": round(statistics.median(times), 2), "max_s": round(max(times), 2),
               "min_s": round(min(times), 2)}  # fmt: skip
    if load:
        up, down = load["all_up"], load["one_down"]
        assert isinstance(up, dict) and isinstance(down, dict)
        load["ratio"] = round(down["ops_per_s"] / up["ops_per_s"], 2)
    out = {"command": " ".join(sys.argv), "daemons": args.daemons, "rounds": rounds,
           "failover": summary, "throughput": load}  # fmt: skip
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"failover": summary, "throughput": load}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
