"""Starting and stopping real ``skueued`` subprocesses (helpers of the e2e fixture).

:func:`start_cluster` starts ``n`` daemons on 127.0.0.1 as a static cluster.  Every
daemon must know the others' addresses when it starts, so free ports are picked first
(bind to port 0, read the port, close) and passed as ``--peers``; another program may grab
one of them in between, so a start that fails with "cannot listen" is retried with fresh
ports.

Each daemon's stdout and stderr go to files (a pipe nobody reads could fill up and stall
a daemon that logs a lot, e.g. under the fuzz test).  :func:`stop` sends SIGTERM, waits a
bounded time, SIGKILLs what is left (and any child a daemon left behind) and reports what
went wrong, so that the caller can fail the test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
START_ATTEMPTS = 4
READY_PREFIX = "skueued ready: "


def skueued_command() -> list[str]:
    """The installed entry point next to this interpreter, else ``python -m cli.skueued``."""
    script = Path(sys.executable).parent / "skueued"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "skueue.cli.skueued"]


def free_ports(count: int) -> list[int]:
    """Ports that were free a moment ago (all bound at once, so they are distinct)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (from /proc; empty where there is none)."""
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the ppid follows the last ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@attrs.define(eq=False)
class Daemon:
    address: str
    proc: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    children: list[int] = attrs.Factory(list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None


@attrs.define(eq=False)
class Cluster:
    daemons: list[Daemon]
    structure: str

    @property
    def addresses(self) -> list[str]:
        return [d.address for d in self.daemons]

    @property
    def procs(self) -> list[subprocess.Popen[bytes]]:
        return [d.proc for d in self.daemons]

    def stderr(self) -> str:
        return "\n".join(f"--- {d.address} stderr ---\n{d.stderr()}" for d in self.daemons)


class StartFailed(Exception):
    def __init__(self, message: str, port_in_use: bool) -> None:
        super().__init__(message)
        self.port_in_use = port_in_use


def spawn(args: list[str], log_dir: Path, name: str, *, skueued_decides: bool = False) -> Daemon:
    """Start one ``skueued`` with ``args``; do not wait for it.  Without ``--replicas``
    in ``args`` it runs one replica, unless ``skueued_decides`` (its default)."""
    out = log_dir / f"{name}.stdout"
    err = log_dir / f"{name}.stderr"
    if not {"--in-memory", "--data-dir"} & set(args):
        # Durable, as skueued is by default, but with the data next to the logs rather
        # than in the working directory.
        args = [*args, "--data-dir", str(log_dir / f"{name}.data")]
    if not skueued_decides and "--replicas" not in args and "--in-memory" not in args:
        # One replica unless the test asks for more: most tests are about serving, and a
        # cluster of 3 durable daemons would replicate by default (3 to 4 times the CPU
        # per operation; the suite runs on 2 cores).  Replication's own tests, and
        # test_default_replicas.py for the default itself, say what they run.
        args = [*args, "--replicas", "1"]
    elif (
        not skueued_decides
        and not {"--failover", "--no-failover", "--in-memory"} & set(args)
        and args[args.index("--replicas") + 1] != "1"
    ):
        # Replicas without failover unless the test asks for it (skueued's default has
        # it): the test waits for the member, or restores it from the copies.
        args = [*args, "--no-failover"]
    with out.open("wb") as fout, err.open("wb") as ferr:
        proc = subprocess.Popen(
            [*skueued_command(), *args],
            stdin=subprocess.DEVNULL,
            stdout=fout,
            stderr=ferr,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    listen = args[args.index("--listen") + 1] if "--listen" in args else ""
    return Daemon(listen, proc, out, err)


def refused(
    args: list[str], log_dir: Path, name: str, timeout_s: float = 60.0, **options: bool
) -> tuple[int, str]:
    """Start a ``skueued`` that is expected to give up by itself: its exit code and its
    stderr (stopped, and the wait re-raised, if it is still running after ``timeout_s``);
    ``options`` as :func:`spawn`'s."""
    daemon = spawn(args, log_dir, name, **options)
    try:
        code = daemon.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop([daemon])
        raise
    return code, daemon.stderr()


def wait_ready(daemons: list[Daemon], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until every daemon printed its ready line; fill in the actual address."""
    deadline = time.monotonic() + timeout_s
    waiting = list(daemons)
    while waiting:
        for d in list(waiting):
            line = next((ln for ln in d.stdout().splitlines() if ln.startswith(READY_PREFIX)), None)
            if line is not None:
                d.address = line.rsplit(" listening on ", 1)[1].strip()
                waiting.remove(d)
            elif not d.alive():
                err = d.stderr()
                raise StartFailed(
                    f"skueued {d.address} exited with {d.proc.returncode} before it was "
                    f"ready; stderr:\n{err}",
                    port_in_use="cannot listen" in err,
                )
        if waiting and time.monotonic() > deadline:
            raise StartFailed(
                f"skueued not ready within {timeout_s:g} s: "
                + "; ".join(f"{d.address} stderr:\n{d.stderr()}" for d in waiting),
                port_in_use=False,
            )
        if waiting:
            time.sleep(0.02)


def stop(daemons: list[Daemon], timeout_s: float = STOP_TIMEOUT_S) -> dict[Daemon, str]:
    """SIGTERM every live daemon, wait, SIGKILL leftovers; return what went wrong per daemon."""
    problems: dict[Daemon, str] = {}
    for d in daemons:
        if d.alive():
            d.children = children_of(d.pid)
            d.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for d in daemons:
        try:
            d.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            d.proc.kill()
            d.proc.wait(timeout=5)
            problems[d] = f"did not exit within {timeout_s:g} s of SIGTERM; killed"
    for d in daemons:
        leftover = [c for c in d.children if Path(f"/proc/{c}").exists()]
        for c in leftover:
            os.kill(c, signal.SIGKILL)
        if leftover:
            problems[d] = f"left child processes {leftover}"
    return problems


def start_cluster(
    n: int,
    structure: str,
    log_dir: Path,
    started: list[Daemon],
    extra_args: tuple[str, ...] = (),
) -> Cluster:
    """Start ``n`` daemons as one static cluster; retry with fresh ports on a collision.
    Every daemon spawned is appended to ``started`` (the caller stops them)."""
    last: StartFailed | None = None
    for attempt in range(START_ATTEMPTS):
        addresses = [f"{HOST}:{p}" for p in free_ports(n)]
        daemons = []
        for i, address in enumerate(addresses):
            peers = ",".join(a for j, a in enumerate(addresses) if j != i)
            args = ["--listen", address, "--structure", structure, *extra_args]
            if peers:
                args += ["--peers", peers]
            daemons.append(spawn(args, log_dir, f"a{attempt}-d{i}"))
        started.extend(daemons)
        try:
            wait_ready(daemons)
        except StartFailed as e:
            stop(daemons)
            if not e.port_in_use:
                raise AssertionError(str(e)) from None
            last = e
            continue
        return Cluster(daemons, structure)
    raise AssertionError(f"could not start {n} daemons after {START_ATTEMPTS} tries: {last}")


def stop_and_check(started: list[Daemon]) -> None:
    """Stop every daemon of ``started`` still running; fail if one had to be killed, left
    a process behind, survived, or exited non-zero on SIGTERM (the fixtures' teardown)."""
    live = [d for d in started if d.alive()]
    problems = stop(live)
    for d in live:
        if d not in problems and d.proc.returncode != 0:
            problems[d] = f"exited with {d.proc.returncode} on SIGTERM"
    assert not [d for d in started if d.alive()], "a daemon survived teardown"
    assert not problems, "; ".join(
        f"{d.address}: {why}\nstderr:\n{d.stderr()[-2000:]}" for d, why in problems.items()
    )
