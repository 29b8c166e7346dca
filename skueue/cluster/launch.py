"""Launch N ``skueued`` daemons on 127.0.0.1 as one static cluster of real processes.

The script ``deploy/local_cluster.py`` (start, status, stop) is built on this module; the
main job, ``skueue bench --spawn`` and the benchmarks use it as a library::

    from skueue.cluster.launch import launch

    with launch(3) as cluster:           # free ports; stopped when the block ends
        cluster.addresses                # ["127.0.0.1:41234", ...]

Theory of operation
-------------------
A static cluster needs every member's address before any member starts, so the launcher
fixes the ports first (consecutive from a base port, each checked free; or ports the
kernel hands out for base port 0) and then starts every daemon at once with the others as
``--peers``.  A daemon prints its ready line only once it reached all its peers, so "every
daemon printed ready" means the cluster is formed.  Each daemon writes stdout and stderr
to ``<port>.log``; the launcher reads its ready line from there, which also lets a
detached cluster (the script's ``start``) outlive the launcher.

The script keeps what ``status`` and ``stop`` need in ``<state-dir>/cluster.json``: pid,
address, log and the process's start time, so that a recycled pid is never signalled.

Only the standard library is used, so that the launcher stays a thin layer over the
daemons it starts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
DEFAULT_BASE_PORT = 7400
DEFAULT_STATE_DIR = ".skueue-cluster"
STATE_FILE = "cluster.json"
STRUCTURES = ("queue", "stack")
LOG_FORMATS = ("console", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
DAEMONS_MAX = 256
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
KILL_TIMEOUT_S = 5.0
POLL_INTERVAL_S = 0.05
LOG_TAIL_LINES = 15
# base port 0: ports are picked, released, then bound by the daemons; another program
# may grab one in between, so a start that lost such a race is retried with new ports.
FREE_PORT_ATTEMPTS = 3

READY_RE = re.compile(r"^skueued ready: (?P<id>\S+) listening on (?P<address>\S+)\s*$", re.M)
PORT_IN_USE_RE = re.compile(r"cannot listen on .*(in use|EADDRINUSE)", re.I)


class ClusterError(RuntimeError):
    """The cluster could not be started, or its state could not be read."""


class PortInUse(ClusterError):
    """A port the cluster needs is taken."""


# -- one daemon ---------------------------------------------------------------------------


@dataclass
class Member:
    """One daemon of the cluster: a child we started (``proc``), or one known by pid only
    (read back from ``cluster.json`` by a later ``status`` or ``stop``)."""

    address: str
    pid: int
    log_path: Path
    start_time: str | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return pid_alive(self.pid, self.start_time)

    def signal(self, signum: int) -> None:
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def describe(self) -> str:
        return f"daemon {self.address} (pid {self.pid})"

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "pid": self.pid,
            "start_time": self.start_time,
            "log": str(self.log_path),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Member:
        return cls(
            address=str(data["address"]),
            pid=int(data["pid"]),
            log_path=Path(data["log"]),
            start_time=data.get("start_time"),
        )


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat from field 3 of proc(5) on (after the command
    name, which may hold spaces); None if there is no such process (or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields if len(fields) > 19 else None


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks) of a pid from /proc; None if it is gone."""
    fields = _stat_fields(pid)
    # fields[0] is field 3 of proc(5) (state); the start time is field 22.
    return None if fields is None else (fields[0], fields[19])


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system) ``pid`` has used so far, from /proc (None where
    there is no /proc, or the process is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    # utime and stime are fields 14 and 15 of proc(5), in clock ticks.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int, start_time: str | None = None) -> bool:
    """Whether ``pid`` runs (a zombie does not count) and is the process that started at
    ``start_time`` (so a recycled pid is not mistaken for a daemon of ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists but belongs to someone else
    if not Path("/proc/self/stat").exists():
        return True  # no procfs (not Linux): kill(0) is all we can know
    stat = _proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return start_time is None or stat[1] == start_time


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"    (cannot read {path}: {e.strerror or e})"
    tail = text.splitlines()[-lines:]
    if not tail:
        return "    (the log is empty)"
    return "\n".join(f"    {line}" for line in tail)


# -- ports --------------------------------------------------------------------------------


def check_port_free(port: int) -> None:
    """Raise PortInUse unless a daemon could listen on ``HOST:port``.  Like the daemon
    (trio), bind with SO_REUSEADDR, so a port in TIME_WAIT counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as e:
            raise PortInUse(
                f"port {port} on {HOST} is in use ({e.strerror or e}); stop whatever "
                f"listens there or choose another --base-port (0 picks free ports)"
            ) from None


def pick_ports(n: int, base_port: int) -> list[int]:
    if base_port == 0:
        sockets = []
        try:
            for _ in range(n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(s)
                s.bind((HOST, 0))
            return [s.getsockname()[1] for s in sockets]
        finally:
            for s in sockets:
                s.close()
    if not 1 <= base_port <= 65535 - n + 1:
        raise ClusterError(f"base port {base_port}: {n} consecutive ports do not fit below 65536")
    ports = list(range(base_port, base_port + n))
    for port in ports:
        check_port_free(port)
    return ports


# -- the daemon command -------------------------------------------------------------------


def skueued_command() -> list[str]:
    """How to run skueued: $SKUEUED, else the one beside this Python, else the repo's
    venv, else the one on PATH, else ``python -m cli.skueued``."""
    override = os.environ.get("SKUEUED")
    if override:
        return shlex.split(override)
    candidates = [
        Path(sys.executable).with_name("skueued"),
        Path(__file__).resolve().parent.parent / ".venv" / "bin" / "skueued",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    found = shutil.which("skueued")
    if found:
        return [found]
    return [sys.executable, "-m", "skueue.cli.skueued"]


# -- the cluster --------------------------------------------------------------------------

# Library clusters still running (strong references: a cluster dropped without stop() is
# still stopped at exit rather than leaked).
_running: set[LaunchedCluster] = set()


def _stop_leftovers() -> None:
    for cluster in list(_running):
        cluster.stop(timeout_s=2.0)


atexit.register(_stop_leftovers)


class LaunchedCluster:
    """N ``skueued`` processes on 127.0.0.1 forming one static cluster.

    Real daemons over real TCP, unlike :class:`skueue.cluster.inprocess.LocalCluster`,
    which runs its processes as tasks inside the calling program.

    ``start()`` returns once every daemon is ready (or raises ClusterError after stopping
    whatever it started); ``stop()`` is idempotent.  Used as a context manager it stops on
    exit.  ``detach=True`` (the script) puts the daemons in their own session so that they
    outlive the launcher; otherwise a cluster still running when Python exits is stopped.
    """

    def __init__(
        self,
        n: int,
        base_port: int = 0,
        structure: str = "queue",
        log_dir: str | os.PathLike[str] | None = None,
        *,
        log_format: str = "console",
        log_level: str = "info",
        ready_timeout_s: float = READY_TIMEOUT_S,
        detach: bool = False,
        command: Sequence[str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        in_memory: bool = False,
        replicas: int | None = None,
    ) -> None:
        if not 1 <= n <= DAEMONS_MAX:
            raise ClusterError(f"a local cluster has 1 to {DAEMONS_MAX} daemons, not {n}")
        if structure not in STRUCTURES:
            raise ClusterError(f"structure must be one of {STRUCTURES}, not {structure!r}")
        if log_format not in LOG_FORMATS:
            raise ClusterError(f"log format must be one of {LOG_FORMATS}, not {log_format!r}")
        if log_level not in LOG_LEVELS:
            raise ClusterError(f"log level must be one of {LOG_LEVELS}, not {log_level!r}")
        if not 0 <= base_port <= 65535:
            raise ClusterError(f"base port {base_port} is out of range")
        self.n = n
        self.base_port = base_port
        self.structure = structure
        self.log_format = log_format
        self.log_level = log_level
        self.ready_timeout_s = ready_timeout_s
        self.detach = detach
        self.command = list(command) if command is not None else skueued_command()
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir).absolute() if log_dir is not None else None
        self.members: list[Member] = []
        # Each daemon keeps its input log in a directory of its own in here (default: in
        # the log directory); in_memory: nothing on disk.
        if in_memory and data_dir is not None:
            raise ClusterError("in_memory and data_dir exclude each other")
        self.in_memory = in_memory
        self.data_dir = Path(data_dir).absolute() if data_dir is not None else None
        if replicas not in (None, 1) and (in_memory or replicas > n):
            raise ClusterError(f"--replicas {replicas} needs {replicas} durable daemons or more")
        self.replicas = replicas  # skueued --replicas (None: skueued's default)

    # -- the public face ------------------------------------------------------------------

    @property
    def addresses(self) -> list[str]:
        return [m.address for m in self.members]

    @property
    def pids(self) -> list[int]:
        return [m.pid for m in self.members]

    def alive(self) -> list[bool]:
        return [m.alive() for m in self.members]

    def status(self) -> list[tuple[str, bool]]:
        return [(m.address, m.alive()) for m in self.members]

    def exit_codes(self) -> list[int | None]:
        """Each daemon's exit status (None: still running); 0 after a clean stop."""
        return [m.exit_code() for m in self.members]

    def __enter__(self) -> LaunchedCluster:
        if not self.members:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LaunchedCluster({self.addresses or self.n}, structure={self.structure!r})"

    # -- start ----------------------------------------------------------------------------

    def start(self) -> LaunchedCluster:
        if self.members:
            raise ClusterError("this cluster is started already")
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="skueue-cluster-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        attempts = FREE_PORT_ATTEMPTS if self.base_port == 0 else 1
        try:
            for attempt in range(1, attempts + 1):
                try:
                    self._spawn(pick_ports(self.n, self.base_port))
                    self._wait_ready()
                    break
                except PortInUse:
                    if attempt == attempts:
                        raise
                    self._terminate(STOP_TIMEOUT_S)  # lost a race for a free port: retry
                    for m in self.members:
                        m.log_path.unlink(missing_ok=True)
                    self.members = []
        except BaseException:
            # The error names the failing daemon and quotes its log, so a temporary log
            # directory can go; a given one keeps the logs.
            self._terminate(STOP_TIMEOUT_S)
            self._drop_own_log_dir()
            raise
        if not self.detach:
            _running.add(self)
        return self

    def _spawn(self, ports: list[int]) -> None:
        assert self.log_dir is not None
        addresses = [f"{HOST}:{p}" for p in ports]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.members = []
        for port, address in zip(ports, addresses, strict=True):
            peers = ",".join(a for a in addresses if a != address)
            argv = [
                *self.command,
                "--listen",
                address,
                "--structure",
                self.structure,
                "--log-format",
                self.log_format,
                "--log-level",
                self.log_level,
            ]
            if peers:
                argv += ["--peers", peers]
            if self.replicas is not None:
                argv += ["--replicas", str(self.replicas)]
            if self.in_memory:
                argv.append("--in-memory")
            else:
                if self.data_dir is None:
                    self.data_dir = self.log_dir / "data"
                argv += ["--data-dir", str(self.data_dir / str(port))]
            log_path = self.log_dir / f"{port}.log"
            with open(log_path, "wb") as log:
                try:
                    proc = subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=self.detach,
                    )
                except OSError as e:
                    raise ClusterError(
                        f"cannot run {shlex.join(self.command)}: {e.strerror or e} "
                        f"(set $SKUEUED to the skueued command)"
                    ) from None
            stat = _proc_stat(proc.pid)
            self.members.append(
                Member(address, proc.pid, log_path, stat[1] if stat else None, proc)
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        waiting = {m.address: m for m in self.members}
        while waiting:
            for address, member in list(waiting.items()):
                ready = self._ready_address(member)
                if ready is not None:
                    if ready != address:
                        raise ClusterError(
                            f"{member.describe()} says it listens on {ready}, not {address}"
                        )
                    del waiting[address]
                    continue
                code = member.exit_code()
                if code is not None:
                    tail = log_tail(member.log_path)
                    error_cls = PortInUse if PORT_IN_USE_RE.search(tail) else ClusterError
                    raise error_cls(
                        f"{member.describe()} exited with status {code} before it was ready; "
                        f"last lines of {member.log_path}:\n{tail}"
                    )
            if not waiting:
                break
            if time.monotonic() > deadline:
                late = list(waiting.values())
                details = "\n".join(
                    f"{m.describe()}, last lines of {m.log_path}:\n{log_tail(m.log_path)}"
                    for m in late
                )
                names = ", ".join(m.address for m in late)
                raise ClusterError(
                    f"not ready within {self.ready_timeout_s:g} s: {names}\n{details}"
                )
            time.sleep(POLL_INTERVAL_S)

    @staticmethod
    def _ready_address(member: Member) -> str | None:
        try:
            text = member.log_path.read_text(errors="replace")
        except OSError:
            return None
        match = READY_RE.search(text)
        return match["address"] if match else None

    # -- stop -----------------------------------------------------------------------------

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        """SIGTERM every daemon, wait up to ``timeout_s``, SIGKILL what is left.  Returns
        the addresses that needed SIGKILL."""
        killed = self._terminate(timeout_s)
        _running.discard(self)
        self._drop_own_log_dir()
        return killed

    def _terminate(self, timeout_s: float) -> list[str]:
        killed = stop_members(self.members, timeout_s)
        for m in self.members:
            if m.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    m.proc.wait(timeout=KILL_TIMEOUT_S)
        return killed

    def _drop_own_log_dir(self) -> None:
        if self._own_log_dir and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None

    # -- state for the script -------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "version": 1,
            "host": HOST,
            "structure": self.structure,
            "command": self.command,
            "daemons": [m.to_json() for m in self.members],
        }


def stop_members(members: Sequence[Member], timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    for m in members:
        m.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(m.alive() for m in members) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
    killed = [m.address for m in members if m.alive()]
    for m in members:
        m.signal(signal.SIGKILL)
    deadline = time.monotonic() + KILL_TIMEOUT_S
    while any(m.alive() for m in members) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
    return killed


def launch(
    n: int,
    base_port: int = 0,
    structure: str = "queue",
    log_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> LaunchedCluster:
    """Start ``n`` daemons and return the running cluster.  Use it as a context manager
    (``with launch(3) as c:``) or call ``c.stop()``; either way it is stopped at exit.
    ``options``: log_format, log_level, ready_timeout_s, command, data_dir, in_memory,
    replicas (see LaunchedCluster)."""
    return LaunchedCluster(n, base_port, structure, log_dir, **options).start()
