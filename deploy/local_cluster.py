"""Launch N ``skueued`` daemons on 127.0.0.1 as one static cluster (a script).

    python deploy/local_cluster.py start N [--base-port P] [--structure queue|stack]
                                           [--state-dir DIR] [--log-format json|console]
    python deploy/local_cluster.py status [--state-dir DIR]
    python deploy/local_cluster.py stop [--state-dir DIR] [--keep-logs]

``start`` leaves the daemons running (detached) and records them in
``<state-dir>/cluster.json`` for ``status`` and ``stop``.  The launching itself lives in
:mod:`skueue.cluster.launch`, which programs import.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from skueue.cluster.launch import (
    DAEMONS_MAX,
    DEFAULT_BASE_PORT,
    DEFAULT_STATE_DIR,
    LOG_FORMATS,
    LOG_LEVELS,
    READY_TIMEOUT_S,
    STATE_FILE,
    STOP_TIMEOUT_S,
    STRUCTURES,
    ClusterError,
    LaunchedCluster,
    Member,
    stop_members,
)

# -- the script ---------------------------------------------------------------------------


def load_state(state_dir: Path) -> list[Member] | None:
    path = state_dir / STATE_FILE
    try:
        data = json.loads(path.read_text())
        return [Member.from_json(d) for d in data["daemons"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ClusterError(f"cannot read {path}: {e}") from None


def remove_state(state_dir: Path, members: Sequence[Member], keep_logs: bool) -> None:
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    if not keep_logs:
        for m in members:
            if m.log_path.parent.resolve() == state_dir.resolve():  # only our own files
                m.log_path.unlink(missing_ok=True)
    # The members' input logs (the launcher's own "data" directory): a stopped local
    # cluster is gone for good, and a new start begins afresh.
    shutil.rmtree(state_dir / "data", ignore_errors=True)
    # rmdir only removes an empty directory: never delete what someone else put there.
    with contextlib.suppress(OSError):
        state_dir.rmdir()


def cmd_start(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    previous = load_state(state_dir)
    if previous is not None:
        running = [m for m in previous if m.alive()]
        if running:
            raise ClusterError(
                f"a cluster is already running from {state_dir} "
                f"({', '.join(m.address for m in running)}); stop it first"
            )
        remove_state(state_dir, previous, keep_logs=False)
    cluster = LaunchedCluster(
        args.n,
        args.base_port,
        args.structure,
        state_dir,
        log_format=args.log_format,
        log_level=args.log_level,
        ready_timeout_s=args.timeout,
        detach=True,
    )
    try:
        cluster.start()
    except ClusterError:
        with contextlib.suppress(OSError):
            state_dir.rmdir()  # made for nothing (a failed daemon's log keeps it)
        raise
    tmp = state_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(cluster.state(), indent=2) + "\n")
    tmp.replace(state_dir / STATE_FILE)
    for address in cluster.addresses:
        print(address)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    members = load_state(state_dir)
    if members is None:
        print(f"no cluster in {state_dir}", file=sys.stderr)
        return 2
    for m in members:
        print(f"{m.address} {'alive' if m.alive() else 'dead'} pid={m.pid} log={m.log_path}")
    return 0 if all(m.alive() for m in members) else 1


def cmd_stop(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    members = load_state(state_dir)
    if members is None:
        print(f"no cluster in {state_dir}", file=sys.stderr)
        return 0
    killed = stop_members(members, args.timeout)
    left = [m for m in members if m.alive()]
    if left:
        raise ClusterError(f"still alive after SIGKILL: {', '.join(m.describe() for m in left)}")
    remove_state(state_dir, members, args.keep_logs)
    note = f" ({len(killed)} needed SIGKILL: {', '.join(killed)})" if killed else ""
    print(f"stopped {len(members)} daemons{note}", file=sys.stderr)
    return 0


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= DAEMONS_MAX:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {DAEMONS_MAX}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0-65535)")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="local_cluster", description="Run a Skueue cluster of N daemons on 127.0.0.1."
    )
    sub = p.add_subparsers(dest="command", required=True)

    def state_dir(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--state-dir",
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help=f"pids and logs (default {DEFAULT_STATE_DIR}/)",
        )

    start = sub.add_parser("start", help="start N daemons and print their addresses")
    start.add_argument("n", type=_count, metavar="N")
    start.add_argument(
        "--base-port",
        type=_port,
        default=DEFAULT_BASE_PORT,
        metavar="P",
        help=f"first of N consecutive ports (default {DEFAULT_BASE_PORT}; 0: free ports)",
    )
    start.add_argument("--structure", choices=STRUCTURES, default="queue")
    start.add_argument("--log-format", choices=LOG_FORMATS, default="console")
    start.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    start.add_argument(
        "--timeout", type=float, default=READY_TIMEOUT_S, help="seconds to wait for ready"
    )
    state_dir(start)

    status = sub.add_parser("status", help="print each daemon's address and whether it lives")
    state_dir(status)

    stop = sub.add_parser("stop", help="SIGTERM every daemon (SIGKILL if late), remove state")
    stop.add_argument(
        "--timeout", type=float, default=STOP_TIMEOUT_S, help="seconds before SIGKILL"
    )
    stop.add_argument("--keep-logs", action="store_true", help="keep the daemons' logs")
    state_dir(stop)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"start": cmd_start, "status": cmd_status, "stop": cmd_stop}
    try:
        return handlers[args.command](args)
    except ClusterError as e:
        print(f"local_cluster: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
