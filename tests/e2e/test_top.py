"""``skueue top`` as a person sees it (issue 15, item 5): the command runs in a tmux pane
against three real daemons under a small bounded workload; the test reads the screen
with ``tmux capture-pane``, then presses Ctrl-C with ``tmux send-keys`` and checks the
exit status is 130 with nothing on stderr.

tmux is installed through apt where it is missing (CI machines are fresh).  Each test
uses a tmux server of its own (``-S``, a socket in a temporary directory), killed and
its directory removed at the end whatever happened, and the
workload is bounded in count and time.  ``SKUEUE_TOP_CAPTURE=FILE`` saves the screen
the test checked (docs/top_capture.txt was made so).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skueue.client.blocking import connect_blocking
from skueue.client.consumer import Leased
from tests.e2e.daemons import Cluster
from tests.e2e.test_cli import ROOT

StartCluster = Callable[..., Cluster]
WIDTH, HEIGHT = 160, 40
WAIT_S = 30.0
# One tmux command (a capture, a key) answers in milliseconds; on a machine loaded
# tenfold it once took over 10 s (a CI run beside simulations), so as long as any wait.
TMUX_TIMEOUT_S = WAIT_S
APT_TIMEOUT_S = 300.0
WORKLOAD_OPS_MAX = 3000
LEASE_S = 60.0
LEASES_KEPT = 5
WORKLOAD_PAUSE_S = 0.01  # a light load: the machine has two cores for three daemons too


def ensure_tmux() -> str:
    """The tmux binary, installed with apt-get if missing (as root, else with sudo -n)."""
    found = shutil.which("tmux")
    if found:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "tmux"]):
        done = subprocess.run(
            [*sudo, *step], capture_output=True, env=env, timeout=APT_TIMEOUT_S, check=False
        )
        assert done.returncode == 0, f"{' '.join(step)} failed: {done.stderr.decode()[-500:]}"
    found = shutil.which("tmux")
    assert found, "apt-get installed tmux, yet it is not on PATH"
    return found


class Pane:
    """One tmux server of our own with one session running one command."""

    def __init__(self, tmux: str, socket: Path) -> None:
        self.tmux, self.socket = tmux, socket

    def run(self, *args: str) -> str:
        out = subprocess.run(
            [self.tmux, "-S", str(self.socket), *args],
            capture_output=True,
            timeout=TMUX_TIMEOUT_S,
            check=True,
        )
        return out.stdout.decode(errors="replace")

    def start(self, command: str) -> None:
        self.run("new-session", "-d", "-s", "top", "-x", str(WIDTH), "-y", str(HEIGHT), command)

    def capture(self) -> str:
        return self.run("capture-pane", "-p", "-t", "top")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "top", *keys)

    def kill(self) -> None:
        subprocess.run(
            [self.tmux, "-S", str(self.socket), "kill-server"],
            capture_output=True,
            timeout=TMUX_TIMEOUT_S,
            check=False,
        )


@pytest.fixture
def pane() -> Iterator[Pane]:
    # A short directory of our own: a socket's path is limited to about 100 bytes.
    directory = Path(tempfile.mkdtemp(prefix="skueue-tmux-"))
    p = Pane(ensure_tmux(), directory / "socket")
    try:
        yield p
    finally:
        p.kill()
        shutil.rmtree(directory, ignore_errors=True)


class Workload:
    """Clients on every member: inserts into two queues, leases from one (acking half,
    keeping LEASES_KEPT, returning the rest); stops when told, after WORKLOAD_OPS_MAX
    rounds, or on its first error (kept for the test)."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.stop = threading.Event()
        self.rounds = 0
        self.error: BaseException | None = None
        self.held: list[Leased] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        a, b, c = self.addresses
        try:
            with connect_blocking(a) as qa, connect_blocking(b) as qb, connect_blocking(c) as qc:
                while not self.stop.is_set() and self.rounds < WORKLOAD_OPS_MAX:
                    qa.enqueue(b"job %d" % self.rounds, queue="jobs")
                    qb.enqueue(b"mail %d" % self.rounds, queue="mail")
                    if self.rounds % 2:  # c removes, leasing some: ack, keep, nack
                        leased = qc.dequeue(queue="jobs", lease=LEASE_S)
                        if leased is not None and self.rounds % 4 == 1:
                            qc.ack(leased)
                        elif leased is not None and len(self.held) < LEASES_KEPT:
                            self.held.append(leased)
                        elif leased is not None:
                            qc.nack(leased)
                    self.rounds += 1
                    time.sleep(WORKLOAD_PAUSE_S)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def __enter__(self) -> Workload:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=WAIT_S)


def top_command(node: str, exit_file: Path, err_file: Path) -> str:
    """A shell line for the pane: skueue top, its stderr to a file, its status to another."""
    # pytest exports COLUMNS=80 and LINES=24, which tmux passes on and rich would obey
    # over the pane's real size.
    env = f"-u COLUMNS -u LINES PYTHONPATH={shlex.quote(str(ROOT))}"
    top = [sys.executable, "-m", "skueue.cli.skueue", "top", "--node", node, "--interval", "0.5"]
    return (
        f"cd {shlex.quote(str(ROOT))} && env {env} {shlex.join(top)} "
        f"2> {shlex.quote(str(err_file))}; echo $? > {shlex.quote(str(exit_file))}"
    )


def member_row(screen: str, address: str) -> dict[str, str] | None:
    """A member's row by column (``*`` marks the anchor; a multi-word state or links
    cell is kept whole), None if the screen has none."""
    heads = next((ln.split() for ln in screen.splitlines() if ln.split()[:1] == ["member"]), None)
    for line in screen.splitlines():
        fields = line.split()
        if heads is None or not fields or fields[0] != address:
            continue
        anchor = len(fields) > 1 and fields[1] == "*"
        if anchor:
            del fields[1]
        numbers = len(heads) - 3  # every column between state and links
        first = next((i for i, f in enumerate(fields[1:], 1) if re.fullmatch(r"[\d.-]+", f)), 0)
        if not first:
            return None
        row = {"member": fields[0], "anchor": str(anchor), "state": " ".join(fields[1:first])}
        row |= dict(zip(heads[2:-1], fields[first : first + numbers], strict=False))
        row["rss"] = " ".join(fields[first + numbers - 1 : first + numbers + 1])
        row["links"] = " ".join(fields[first + numbers + 1 :])
        return row
    return None


def queue_line(screen: str, name: str) -> list[str] | None:
    for line in screen.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[0] == name and fields[1] == "queue":
            return fields
    return None


def number(cell: str | None) -> float:
    """A cell's figure; 0 for none yet (``-``: the first answer has no rates)."""
    try:
        return float(cell or "")
    except ValueError:
        return 0.0


def busy(screen: str, addresses: list[str]) -> bool:
    """Every member and both queues shown; inserts per second where the workload
    inserts, in both queues, and leases held where it leases."""
    rows = [member_row(screen, a) for a in addresses]
    queues = [queue_line(screen, q) for q in ("jobs", "mail")]
    if None in rows or None in queues:
        return False
    a, b, c = (r or {} for r in rows)
    return (
        number(a.get("ins/s")) > 0
        and number(b.get("ins/s")) > 0
        and number(c.get("leases")) > 0
        and number(c.get("lease/s")) > 0
        and all(q is not None and number(q[3]) > 0 for q in queues)
    )


def wait_for(pane: Pane, check: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + WAIT_S
    screen = pane.capture()
    while not check(screen):
        assert time.monotonic() < deadline, f"the pane never showed {what}:\n{screen}"
        time.sleep(0.25)
        screen = pane.capture()
    return screen


def test_top_under_tmux_shows_members_and_queues_and_quits_on_ctrl_c(
    skueued_cluster: StartCluster, pane: Pane, tmp_path: Path
) -> None:
    cluster = skueued_cluster(3)
    addresses = cluster.addresses
    exit_file, err_file = tmp_path / "exit", tmp_path / "stderr"
    pane.start(top_command(addresses[0], exit_file, err_file))

    with Workload(addresses) as load:
        screen = wait_for(pane, lambda s: busy(s, addresses), "three busy members and queues")
        assert load.error is None, load.error
    shown = [screen]
    assert screen.startswith(f"skueue top  via {addresses[0]}  3 members  anchor 127.0.0.1:")
    for address in addresses:
        row = member_row(screen, address)
        assert row is not None and row["state"] == "ready" and row["links"] == "up", row
        assert re.fullmatch(r"\d+%", row["cpu"]) and row["rss"].endswith(" MiB"), row
        assert int(row["entries"]) >= 0 and row["pending"].isdigit(), row
    jobs = queue_line(screen, "jobs")
    assert jobs is not None and int(jobs[2]) >= 0  # its depth, from the anchor

    # A member goes away: the view says who, and goes on.
    gone = cluster.daemons[2]
    gone.proc.terminate()
    assert gone.proc.wait(timeout=WAIT_S) == 0

    def shows_it_down(s: str) -> bool:
        row = member_row(s, gone.address)
        return row is not None and row["state"] == "no answer"

    screen = wait_for(pane, shows_it_down, f"{gone.address} without an answer")
    assert f"down: {gone.address}" in screen
    shown.append(screen)
    saved = os.environ.get("SKUEUE_TOP_CAPTURE")
    if saved:
        Path(saved).write_text(
            f"\n--- the same view once {gone.address} was stopped ---\n\n".join(
                "\n".join(ln.rstrip() for ln in s.splitlines()).rstrip() + "\n" for s in shown
            )
        )

    pane.keys("C-c")
    deadline = time.monotonic() + WAIT_S
    while not exit_file.exists() or not exit_file.read_text().strip():
        assert time.monotonic() < deadline, f"skueue top did not exit on Ctrl-C:\n{pane.capture()}"
        time.sleep(0.1)
    assert exit_file.read_text().strip() == "130"
    assert err_file.read_text() == ""
