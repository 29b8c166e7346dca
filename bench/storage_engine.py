"""The storage engines' throughput with 1 KB items, against seed 004's BigQueue figures.

    .venv/bin/python bench/storage_engine.py [--items 100000] [--item-bytes 1024]
        [--sync-every 0,1024] [--scenarios sequential,interleaved,threads]
        [--engines paged,memory] [--page-bytes 33554432] [--repeat 3] [--dir DIR]

BigQueue (seed 004) reports 333 MB/s producing then consuming and 166 MB/s producing and
consuming concurrently, 1 KB items, on a 2012 commodity machine, with no fsync at all
(its mapped pages are flushed when the OS pleases).  Each row here moves ``--items``
items of ``--item-bytes`` through one store, and MB/s counts every item once (10**6 bytes
a MB): the bytes that went in and came out, over the whole run's wall time.

- ``sequential``: append all N, then read + remove all N in append order.
- ``interleaved``: the daemon's "concurrent" case.  A daemon is single-threaded (one
  owner task per process), so a producer and a consumer are interleaved on one thread:
  append a burst of ``--burst`` items, then read + remove the oldest burst, until N.  The
  store stays small and its pages are freed (garbage-collected at each sync) as it goes.
- ``threads``: a producer thread and a consumer thread really at once, sharing the store
  through one lock (the engine has one owner; the lock is the cheapest honest owner).
  Under the GIL this measures contention, not parallelism; it is here because seed 004's
  figure is for threads.

``--sync-every K`` is the fsync policy of a row: ``sync()`` (msync of what was written,
then GC) after every K appends and after every K removes, and once at the end; ``0``
means only the one final sync (BigQueue's policy, closest to its figures).  A daemon will
sync once per protocol step (group commit), whose size is its batch.  ``memory`` rows
(the dict engine) are the Python ceiling: what the same loop costs with no file at all.

Each row runs ``--repeat`` times on a fresh store and keeps the fastest (the others and
their median are in the JSON and the table): a shared machine's noise only ever slows a
run down.  The process's CPU time per item is printed too: another process's load
lengthens the wall time much more than it does the CPU time.  Every consumed element is
compared with what was appended (a wrong one fails the row).
Prints the command, a Markdown table with our ratio to the seed's figure for the same
shape, and writes the same as JSON (``--out``).  Store directories are temporary (under
``--dir`` if given) and deleted after each row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from skueue.dht.storage import MemoryEntryStore  # noqa: E402
from skueue.dht.storage.paged import PAGE_BYTES_DEFAULT, PagedEntryStore  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "storage_engine.json"
SEED_MB_S = {"sequential": 333.0, "interleaved": 166.0, "threads": 166.0}
SCENARIOS = ("sequential", "interleaved", "threads")
ENGINES = ("paged", "memory")
PAYLOADS = 64  # distinct elements, reused: building N fresh ones would be measured too


def payloads(item_bytes: int) -> list[bytes]:
    return [bytes([i]) * item_bytes for i in range(PAYLOADS)]


def policy(sync_every: int) -> str:
    return f"sync every {sync_every} appends and removes" if sync_every else "one final sync"


def sequential(store: Any, items: int, data: list[bytes], sync_every: int, burst: int) -> int:
    """Append all, then consume all; returns the number of wrong elements."""
    append, read, remove, sync = store.append, store.read, store.remove, store.sync
    k = sync_every or items + 1
    ids = []
    for i in range(items):
        ids.append(append(i + 1, 0, data[i % PAYLOADS]))
        if (i + 1) % k == 0:
            sync()
    wrong = 0
    for i, record in enumerate(ids):
        if read(record) != data[i % PAYLOADS]:
            wrong += 1
        remove(record)
        if (i + 1) % k == 0:
            sync()
    sync()
    return wrong


def interleaved(store: Any, items: int, data: list[bytes], sync_every: int, burst: int) -> int:
    """Bursts of appends, each followed by consuming the same number of oldest items."""
    append, read, remove, sync = store.append, store.read, store.remove, store.sync
    k = sync_every or items + 1
    waiting: deque[tuple[int, int]] = deque()
    wrong = appended = consumed = 0
    while consumed < items:
        for _ in range(min(burst, items - appended)):
            waiting.append((append(appended + 1, 0, data[appended % PAYLOADS]), appended))
            appended += 1
            if appended % k == 0:
                sync()
        for _ in range(len(waiting)):
            record, i = waiting.popleft()
            if read(record) != data[i % PAYLOADS]:
                wrong += 1
            remove(record)
            consumed += 1
            if consumed % k == 0:
                sync()
    sync()
    return wrong


def threads(store: Any, items: int, data: list[bytes], sync_every: int, burst: int) -> int:
    """A producer thread and a consumer thread; one lock owns the store."""
    lock = threading.Lock()
    waiting: deque[tuple[int, int]] = deque()
    k = sync_every or items + 1
    wrong = [0]

    def produce() -> None:
        for i in range(items):
            with lock:
                waiting.append((store.append(i + 1, 0, data[i % PAYLOADS]), i))
                if (i + 1) % k == 0:
                    store.sync()

    def consume() -> None:
        done = 0
        while done < items:
            with lock:
                for _ in range(min(len(waiting), burst)):
                    record, i = waiting.popleft()
                    if store.read(record) != data[i % PAYLOADS]:
                        wrong[0] += 1
                    store.remove(record)
                    done += 1
                    if done % k == 0:
                        store.sync()
            if not waiting:
                time.sleep(0)  # let the producer have the GIL

    workers = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    store.sync()
    return wrong[0]


RUNS: dict[str, Callable[[Any, int, list[bytes], int, int], int]] = {
    "sequential": sequential,
    "interleaved": interleaved,
    "threads": threads,
}


def measure(
    engine: str,
    scenario: str,
    items: int,
    item_bytes: int = 1024,
    sync_every: int = 0,
    page_bytes: int = PAGE_BYTES_DEFAULT,
    burst: int = 256,
    directory: Path | None = None,
) -> dict[str, Any]:
    """One row: a fresh store, the scenario, MB/s over the whole run, and its checks."""
    data = payloads(item_bytes)
    folder = Path(tempfile.mkdtemp(prefix="skueue-storage-", dir=directory))
    try:
        store: Any = (
            PagedEntryStore(folder / "store", page_bytes=page_bytes)
            if engine == "paged"
            else MemoryEntryStore()
        )
        start, cpu_start = time.perf_counter(), time.process_time()
        wrong = RUNS[scenario](store, items, data, sync_every, burst)
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
        left = len(store)
        pages = store.page_files() if engine == "paged" else {}
        store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    mb_s = items * item_bytes / seconds / 1e6
    return {
        "engine": engine,
        "scenario": scenario,
        "items": items,
        "item_bytes": item_bytes,
        "sync_every": sync_every,
        "fsync_policy": policy(sync_every) if engine == "paged" else "none (memory)",
        "page_bytes": page_bytes if engine == "paged" else None,
        "seconds": seconds,
        "mb_per_s": mb_s,
        "us_per_item": seconds * 1e6 / items,
        "cpu_us_per_item": cpu_seconds * 1e6 / items,
        "seed_mb_per_s": SEED_MB_S[scenario],
        "ratio_to_seed": mb_s / SEED_MB_S[scenario],
        "wrong": wrong,
        "left": left,
        "pages_left": pages,
    }


def filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on (the longest mount point above it)."""
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                where = fields[1]
                if str(path).startswith(where) and len(where) > len(best):
                    best, kind = where, fields[2]
    except OSError:
        pass
    return f"{kind} at {best or '?'}"


def command_line() -> str:
    python = sys.executable
    if python.startswith(os.getcwd() + os.sep):
        python = os.path.relpath(python)
    return shlex.join([python, *sys.argv])


def print_report(rows: list[dict[str, Any]], machine: str, disk: str) -> None:
    print(f"\nMachine: {machine}; store directory on {disk}.\n\n```sh\n{command_line()}\n```\n")
    columns = ("engine", "scenario", "fsync policy", "items", "MB/s", "µs/item", "CPU µs/item",
               "median MB/s", "seed 004 MB/s", "ours/seed")  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        print(
            f"| {r['engine']} | {r['scenario']} | {r['fsync_policy']} | {r['items']} "
            f"| {r['mb_per_s']:.0f} | {r['us_per_item']:.2f} | {r['cpu_us_per_item']:.2f} "
            f"| {r['median_mb_per_s']:.0f} | {r['seed_mb_per_s']:.0f} "
            f"| {r['ratio_to_seed']:.2f} |"
        )
    print(
        "\nMB/s = items x item bytes / wall time of the whole run (each item counted once, in "
        "and out), best of the repeats (µs/item and CPU µs/item, the process's CPU time, are "
        "that run's; median MB/s is of all repeats); seed 004's figures had no fsync.  "
        "'interleaved' is one thread taking producer and consumer turns (the daemon's "
        "shape); 'threads' is two threads and a lock."
    )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--item-bytes", type=int, default=1024)
    parser.add_argument("--sync-every", default="0,1024", help="fsync policies; 0 = final only")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--page-bytes", type=int, default=PAGE_BYTES_DEFAULT)
    parser.add_argument("--burst", type=int, default=256, help="items per producer turn")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is kept")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    scenarios = args.scenarios.split(",")
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; choose from {','.join(SCENARIOS)}")
    rows = []
    for engine in args.engines.split(","):
        policies = [int(k) for k in args.sync_every.split(",")] if engine == "paged" else [0]
        for scenario in scenarios:
            for sync_every in policies:
                tries = [measure(engine, scenario, args.items, args.item_bytes, sync_every,
                                 args.page_bytes, args.burst, args.dir)
                         for _ in range(args.repeat)]  # fmt: skip
                row = max(tries, key=lambda r: r["mb_per_s"])
                row["wrong"] = sum(r["wrong"] for r in tries)
                row["left"] = sum(r["left"] for r in tries)
                row["repeats_mb_per_s"] = [r["mb_per_s"] for r in tries]
                row["median_mb_per_s"] = statistics.median(row["repeats_mb_per_s"])
                print(f"{engine:6} {scenario:11} {row['fsync_policy']:38} "
                      f"{row['mb_per_s']:7.0f} MB/s", file=sys.stderr)  # fmt: skip
                rows.append(row)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    disk = filesystem(Path(args.dir or tempfile.gettempdir()).resolve())
    print_report(rows, machine, disk)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report = {"machine": machine, "disk": disk, "command": command_line(), "options": options,
              "rows": rows}  # fmt: skip
    args.out.write_text(json.dumps(report, indent=2))
    bad = [r for r in rows if r["wrong"] or r["left"]]
    if bad:
        raise SystemExit(f"{len(bad)} row(s) read a wrong element or left items behind")
    return rows


if __name__ == "__main__":
    main()
