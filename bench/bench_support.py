"""What the benchmarks against other systems share: CPU from /proc, pinning, a Redis of
their own, stopping the processes they start, what the reports say about the setup.

- :func:`cpu_seconds`: user + system CPU of processes (all their threads) from
  ``/proc/<pid>/stat``, in clock ticks (10 ms per process on Linux);
- :func:`pin`: a running process, every thread of it, onto some cores (what
  ``taskset -a -p -c`` does; threads it starts later inherit it);
- :func:`ensure_redis` and :func:`start_redis`: Debian's ``redis-server`` (installed
  through apt where missing), or a binary given by path with its libraries in a folder
  beside it, started on a free loopback port in a directory of the caller's;
- :func:`stop_popen`, :func:`kill_pid`, :func:`log_tail`: stopping a server we started
  (its own child, or one it left behind) and saying why it did not start;
- :func:`command_line`, :func:`describe_machine`, :func:`fs_type`, :func:`first_line`,
  :func:`package_version`: for the reports.

bench/ is not a package: scripts put this folder on ``sys.path`` and import it by name.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HOST = "127.0.0.1"
REDIS_READY_TIMEOUT_S = 10.0
REDIS_STOP_TIMEOUT_S = 10.0

# --durability: what each system is told, so that both keep the same promise.
#   none      Redis without persistence; Skueue --in-memory
#   always    Redis AOF, appendfsync always; Skueue --fsync batch (one fsync per step,
#             before any reply of the step: an acknowledged operation survives power loss)
#   everysec  Redis AOF, appendfsync everysec; Skueue --fsync interval=1000
DURABILITY = {
    "none": (["--appendonly", "no"], None),
    "always": (["--appendonly", "yes", "--appendfsync", "always"], "batch"),
    "everysec": (["--appendonly", "yes", "--appendfsync", "everysec"], "interval=1000"),
}


# -- measuring ---------------------------------------------------------------------------


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU the processes (all their threads) have used so far."""
    total_ticks = 0
    for pid in pids:
        # The command name in parentheses may hold spaces: split after its ")".
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total_ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return total_ticks / os.sysconf("SC_CLK_TCK")


def pin(pid: int, cores: Collection[int]) -> None:
    """Every thread of ``pid`` onto ``cores``.  sched_setaffinity acts on one thread, so
    each task of /proc/<pid>/task gets it; threads made later inherit their maker's."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), set(cores))


# -- Redis -------------------------------------------------------------------------------


def ensure_package(binary: str, package: str, path: str | None = None) -> str:
    """The binary's path (``path`` where given, else ``binary`` on PATH), installing
    Debian's ``package`` through apt where it is missing: the benchmarks bring their
    peers themselves."""

    def found() -> str | None:
        return path if path and os.access(path, os.X_OK) else shutil.which(binary)

    if (where := found()) is not None:
        return where
    print(f"{binary} not found; installing Debian's {package}", file=sys.stderr)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env, timeout=600)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-qq", package], check=True, env=env, timeout=900
    )
    if (where := found()) is None:
        raise SystemExit(f"{binary} is still missing after apt-get install {package}")
    return where


def ensure_redis(binary: str | None = None) -> str:
    """``binary`` if given (it must be executable), else ``redis-server`` on PATH, else
    Debian's, installed through apt."""
    if binary is not None:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise SystemExit(f"--redis-server {binary}: not an executable file")
        return binary
    return ensure_package("redis-server", "redis-server")


def redis_environment(binary: str) -> dict[str, str]:
    """The environment to run ``binary`` in: ours, with ``<binary's folder>/../lib``
    first on LD_LIBRARY_PATH where that folder exists (a Redis copied to a machine
    without it carries its libraries there)."""
    env = dict(os.environ)
    lib = Path(binary).resolve().parent.parent / "lib"
    if Path(binary).resolve().parent.name == "bin" and lib.is_dir():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(lib), env.get("LD_LIBRARY_PATH", "")) if p
        )
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def start_redis(
    binary: str,
    durability: str = "none",
    directory: str | None = None,
    cores: Collection[int] | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """Redis on a free loopback port (pinned to ``cores`` if given), once it accepts."""
    port = free_port()
    persistence = DURABILITY[durability][0]
    where = ["--dir", directory] if directory else []
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", HOST, "--save", "", *persistence, *where],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=redis_environment(binary),
    )
    deadline = time.monotonic() + REDIS_READY_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
            if cores is not None:
                pin(proc.pid, cores)
            return proc, port
        except OSError:
            time.sleep(0.05)
    stop_redis(proc)
    raise SystemExit(f"{binary} did not start (exit status {proc.returncode})")


def stop_redis(proc: subprocess.Popen[bytes]) -> None:
    stop_popen(proc, REDIS_STOP_TIMEOUT_S)


# -- processes we started ----------------------------------------------------------------


def stop_popen(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout_s``, to a child we started."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)


def kill_pid(pid: int, timeout_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout_s``, to one process we started (one that is
    not our child: a server's own children, say)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            if not Path(f"/proc/{pid}").exists() or proc_state(pid) == "Z":
                return
            time.sleep(0.05)


def proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def log_tail(path: Path, lines: int = 5) -> str:
    """The last lines of a server's log, on one line (for the error that it did not start)."""
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


# -- the report --------------------------------------------------------------------------


def fs_type(path: Path) -> str:
    """The file system ``path`` is on, from /proc/mounts (the longest mount prefix)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 3 or len(fields[1]) <= len(best):
                continue
            mount = fields[1].rstrip("/") + "/"
            if f"{path}/".startswith(mount):
                best, kind = fields[1], fields[2]
    return kind


def describe_machine(cores: Sequence[int], redis: str | None) -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    text = f"{platform.machine()}, {len(cores)} cores ({model}), Python {platform.python_version()}"
    if redis:
        version = subprocess.run(
            [redis, "--version"], capture_output=True, text=True, check=False,
            env=redis_environment(redis),
        ).stdout.split()  # fmt: skip
        text += ", " + " ".join(version[:3]) if version else ""
    return text


def command_line() -> str:
    """The command as it was typed (the interpreter relative to here, if inside)."""
    python = sys.executable
    if python.startswith(os.getcwd() + os.sep):
        python = os.path.relpath(python)
    return shlex.join([python, *sys.argv])


def first_line(argv: Sequence[str], default: str, env: dict[str, str] | None = None) -> str:
    """The first line a command prints (a version, say), or ``default``."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(argv, capture_output=True, timeout=30, env=env, check=True)
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        if lines:
            return lines[0].strip()
    return default


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"
