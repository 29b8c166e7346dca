"""deploy/skueued.service started, restarted and stopped by a real systemd (issue 15 item 7).

No systemd runs as PID 1 on the machines these tests run on (``systemctl`` and
``systemd-run`` find no manager), so the test boots a throwaway one: a ``systemd-nspawn``
container whose root is an overlay of this machine's root with a tmpfs on top (whatever
it writes vanishes with it) and whose network is its own (only ``lo``).  In it, the
operator's guide's set-up (deploy/README.md, "One daemon per host with systemd"): the
``skueue`` user; the project in /opt/skueue with a venv made by the system's python3.X;
/etc/skueue with the env file, a cluster key, an admin token and TLS files from ``skueue
certs``; the unit, unchanged, in /etc/systemd/system.  (One departure: the venv takes its
dependencies from this test's own environment through a .pth file instead of PyPI, so
that the test needs no network.)  A second member, skueue-b, runs by hand beside it.

- ``systemctl start``: active, and ``skueue health`` says ready;
- elements enqueued, then ``systemctl restart``: they are still there (the input log in
  /var/lib/skueue, made by ``StateDirectory=`` and owned by the skueue user);
- ``systemctl stop`` with ``SKUEUE_LEAVE_ON_STOP=no``: inactive, result "success", the
  daemon exited 0 on SIGTERM, and ExecStop left the membership alone;
- ``systemctl stop`` with ``SKUEUE_LEAVE_ON_STOP=yes``: ExecStop made the member leave
  (skueue-b holds every element, and is alone), and a later ``systemctl start`` fails
  with "left its cluster".

Skipped, saying why, only where the facility is missing: not Linux or not root, no
``systemd-nspawn`` (Debian: ``systemd-container``) or systemd, no system python3.X
outside /root and /home (the unit's ``ProtectHome=yes`` hides those), or the kernel
refuses the overlay mount.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.daemons import ROOT

MACHINE = "skqsd"
SYSTEM_PYTHON = Path(f"/usr/bin/python3.{sys.version_info.minor}")
SYSTEMD = Path("/usr/lib/systemd/systemd")
BOOT_TIMEOUT_S = 60.0
STEP_TIMEOUT_S = 90.0
ELEMENTS = 5
VENV = "/opt/skueue/.venv"
# This venv's packages (the dependencies), bound read-only into the container there.
DEPENDENCIES_HOST = sysconfig.get_paths()["purelib"]
DEPENDENCIES = "/opt/skueue-test-dependencies"
CLIENT_ENV = (
    "export SKUEUE_TLS_CA=/etc/skueue/tls/ca.crt "
    'SKUEUE_TOKEN="$(awk \'$1 == "admin" { print $2; exit }\' /etc/skueue/client.tokens)"'
)


def why_unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "systemd is Linux-only"
    if os.geteuid() != 0:
        return "needs root (to boot a systemd in a container)"
    for tool in ("systemd-nspawn", "nsenter", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` on PATH (systemd-nspawn: Debian's systemd-container)"
    if not SYSTEMD.exists():
        return f"no systemd at {SYSTEMD}"
    if not SYSTEM_PYTHON.exists():
        return f"no {SYSTEM_PYTHON}: the unit's venv needs a Python outside /root and /home"
    return None


def own_cgroups() -> list[Path]:
    """Cgroups of our own for nspawn and its container, made here and removed after.

    nspawn puts itself and the container in "supervisor" and "payload" cgroups under the
    one it runs in; without a systemd to ask (--keep-unit) that would be the machine's
    root cgroup.  On a hybrid hierarchy (cgroup v1 with name=systemd, plus v2 in
    "unified") it needs its cgroup in both, and the v1 "payload" and "supervisor" made
    beforehand."""
    name = f"skueue-test-{os.getpid()}"
    hybrid = Path("/sys/fs/cgroup/systemd")
    if (hybrid / "cgroup.procs").exists():
        bases = [
            b for b in (hybrid, Path("/sys/fs/cgroup/unified")) if (b / "cgroup.procs").exists()
        ]
        made = [b / name for b in bases]
        for sub in ("payload", "supervisor"):
            (made[0] / sub).mkdir(parents=True)
    elif Path("/sys/fs/cgroup/cgroup.procs").exists():
        made = [Path("/sys/fs/cgroup") / name]
    else:
        return []
    for path in made:
        path.mkdir(exist_ok=True)
    return made


class Container:
    """The throwaway systemd; :meth:`close` undoes everything, whatever happened."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.upper = base / "upper"
        self.log = base / "boot.log"
        self.cgroups: list[Path] = []
        self.nspawn: subprocess.Popen[bytes] | None = None
        self.pid1 = 0
        self.mounted: list[Path] = []

    def mount(self) -> str | None:
        """The overlay root; a reason if the kernel refuses it (then skip)."""
        self.root.mkdir(parents=True)
        self.upper.mkdir()
        for what, where, options in (
            ("tmpfs", self.upper, "size=2g"),
            ("overlay", self.root, f"lowerdir=/,upperdir={self.upper}/u,workdir={self.upper}/w"),
        ):
            if what == "overlay":
                (self.upper / "u").mkdir()
                (self.upper / "w").mkdir()
            done = subprocess.run(
                ["mount", "-t", what, "-o", options, what, str(where)],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                return f"cannot mount the container's {what} root: {done.stderr.strip()}"
            self.mounted.append(where)
        return None

    def nspawn_argv(self, *extra: str) -> list[str]:
        """systemd-nspawn with ``extra``, started from our own cgroups."""
        into = "".join(f"echo $$ > {c}/cgroup.procs && " for c in self.cgroups)
        return ["sh", "-c", f'{into}exec "$@"', "sh",
                "systemd-nspawn", "-q", "-D", str(self.root), "--register=no", "--keep-unit",
                "--link-journal=no", f"--machine={MACHINE}", "--private-network",
                # The checkout at the same path inside, and this venv's packages where the
                # unit's sandbox sees them: the overlay of "/" holds no other mount's
                # files, a clone may live on one, and PrivateTmp= hides /tmp from the unit.
                f"--bind-ro={ROOT}", f"--bind-ro={DEPENDENCIES_HOST}:{DEPENDENCIES}",
                *extra]  # fmt: skip

    def prepare(self, script: str) -> None:
        """Run ``script`` in the container's root before it boots (no init)."""
        done = subprocess.run(
            self.nspawn_argv("--pipe", "sh", "-ec", script),
            capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"setting up the container failed:\n{done.stderr[-3000:]}"

    def boot(self) -> None:
        argv = self.nspawn_argv("--console=passive", "-b", "systemd.unit=basic.target")
        with self.log.open("wb") as log:
            self.nspawn = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        children = Path(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children")
        while not self.pid1:
            assert self.nspawn.poll() is None, f"nspawn exited:\n{self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the container's init never started"
            for pid in children.read_text().split():
                if Path(f"/proc/{pid}/comm").read_text().strip() == "systemd":
                    self.pid1 = int(pid)
            time.sleep(0.1)
        state = ""
        while state not in ("running", "degraded"):
            assert time.monotonic() < deadline, f"systemd is {state!r} after {BOOT_TIMEOUT_S} s"
            time.sleep(0.2)
            state = self.sh("systemctl is-system-running || true").stdout.strip()

    def sh(self, script: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``script`` inside the booted container (all its namespaces)."""
        done = subprocess.run(
            ["nsenter", "-t", str(self.pid1), "-a", "sh", "-c", script],
            capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert not check or done.returncode == 0, f"{script!r} failed: {done}"
        return done

    def unit(self, *properties: str) -> dict[str, str]:
        shown = self.sh(f"systemctl show skueued -p {' -p '.join(properties)}", check=True)
        return dict(line.split("=", 1) for line in shown.stdout.splitlines())

    def journal(self) -> str:
        return self.sh("journalctl -u skueued -o cat --no-pager").stdout

    def close(self) -> None:
        if self.nspawn is not None and self.nspawn.poll() is None:
            self.nspawn.send_signal(signal.SIGTERM)  # nspawn shuts its systemd down
            try:
                self.nspawn.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.nspawn.kill()
                self.nspawn.wait(timeout=10)
        for where in reversed(self.mounted):
            subprocess.run(["umount", str(where)], timeout=30, check=False)
        # What nspawn leaves behind on a machine without systemd as init (the directories
        # only if empty: another container may use them).
        shutil.rmtree(f"/run/systemd/nspawn/propagate/{MACHINE}", ignore_errors=True)
        for empty in ("propagate", "locks", ""):
            with contextlib.suppress(OSError):
                Path("/run/systemd/nspawn", empty).rmdir()
        for cgroup in self.cgroups:  # empty now: the deepest first
            for path in sorted(cgroup.glob("**/"), key=lambda p: -len(p.parts)):
                path.rmdir()


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(reason)
    box = Container(tmp_path / "systemd")
    try:
        box.cgroups = own_cgroups()
        reason = box.mount()
        if reason is not None:
            pytest.skip(reason)
        yield box
    finally:
        box.close()
    assert not box.mounted or not any(
        str(m) in Path("/proc/mounts").read_text() for m in box.mounted
    )


def setup_script() -> str:
    """The operator's guide's steps 1-4 (but enabling the unit), for a member skueue-a
    on 127.0.0.1:7400 whose one peer is skueue-b on 127.0.0.1:7401."""
    venv_site = f"{VENV}/lib/python3.{sys.version_info.minor}/site-packages"
    sources = " ".join(
        str(ROOT / n)
        for n in (
            "pyproject.toml",
            "README.md",
            "skueue",
            "overlay",
            "dht",
            "cli",
            "deploy",
        )  # fmt: skip
    )
    return f"""
useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin skueue
mkdir -p /opt/skueue && cp -a {sources} /opt/skueue/
{SYSTEM_PYTHON} -m venv {VENV}
PYTHONPATH={DEPENDENCIES} {VENV}/bin/python -m pip install -q --no-index --no-deps \
    --no-build-isolation /opt/skueue
echo {DEPENDENCIES} > {venv_site}/zz-dependencies-of-the-test.pth
install -d -m 0755 /etc/skueue /etc/skueue/tls
sed -e 's/^SKUEUE_LISTEN=.*/SKUEUE_LISTEN=127.0.0.1:7400/' \
    -e 's/^SKUEUE_PEERS=.*/SKUEUE_PEERS=127.0.0.1:7401/' \
    -e 's/^SKUEUE_ID=.*/SKUEUE_ID=skueue-a/' \
    /opt/skueue/deploy/skueued.env.example | install -m 0644 /dev/stdin /etc/skueue/skueued.env
{VENV}/bin/skueue keygen --out /etc/skueue/cluster.key
chown skueue /etc/skueue/cluster.key
echo "admin $({VENV}/bin/skueue keygen)" \
    | install -m 0600 -o skueue /dev/stdin /etc/skueue/client.tokens
{VENV}/bin/skueue certs /root/tls --host skueue-a,127.0.0.1 --host skueue-b,127.0.0.1
install -m 0644 /root/tls/ca.crt /etc/skueue/tls/ca.crt
install -m 0644 /root/tls/skueue-a.crt /etc/skueue/tls/host.crt
install -m 0600 -o skueue /root/tls/skueue-a.key /etc/skueue/tls/host.key
install -m 0644 /opt/skueue/deploy/skueued.service /etc/systemd/system/
"""


MEMBER_B = (
    f"setsid {VENV}/bin/skueued --listen 127.0.0.1:7401 --peers 127.0.0.1:7400 --id skueue-b "
    "--data-dir /root/b --cluster-key /etc/skueue/cluster.key "
    "--client-tokens /etc/skueue/client.tokens --tls-ca /etc/skueue/tls/ca.crt "
    "--tls-cert /root/tls/skueue-b.crt --tls-key /root/tls/skueue-b.key "
    "</dev/null >/root/b.log 2>&1 &"
)


def client(box: Container, command: str) -> subprocess.CompletedProcess[str]:
    return box.sh(f"{CLIENT_ENV}; {VENV}/bin/skueue {command}")


def wait_ready(box: Container, node: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while (health := client(box, f"health --node {node}")).returncode != 0:
        assert time.monotonic() < deadline, f"{node} not ready: {health}\n{box.journal()[-3000:]}"
        time.sleep(0.3)


def test_the_unit_starts_restarts_and_stops_under_systemd(container: Container) -> None:
    box = container
    began = time.monotonic()
    box.prepare(setup_script())
    box.boot()
    booted_s = time.monotonic() - began

    box.sh(MEMBER_B, check=True)
    box.sh("systemctl start skueued", check=True)
    wait_ready(box, "127.0.0.1:7400")
    assert box.unit("ActiveState")["ActiveState"] == "active"
    owner = box.sh("stat -c '%U %a' /var/lib/skueue", check=True).stdout.split()
    assert owner == ["skueue", "700"], owner  # StateDirectory=, StateDirectoryMode=
    for i in range(ELEMENTS):
        assert client(box, f"enqueue --node 127.0.0.1:7400 e{i}").returncode == 0

    # restart: ExecStop does nothing (SKUEUE_LEAVE_ON_STOP=no), the data directory stays.
    first = box.unit("MainPID")["MainPID"]
    box.sh("systemctl restart skueued", check=True)
    wait_ready(box, "127.0.0.1:7400")
    assert box.unit("MainPID")["MainPID"] != first
    got = client(box, "dequeue --node 127.0.0.1:7400")
    assert got.stdout.strip() == "e0", got

    box.sh("systemctl stop skueued", check=True)
    stopped = box.unit("ActiveState", "Result", "ExecMainStatus")
    assert stopped == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
    stats = client(box, "stats --node 127.0.0.1:7401")
    assert "unreachable: skueue-a" in stats.stdout, stats  # still a member, only stopped

    box.sh("systemctl start skueued", check=True)
    wait_ready(box, "127.0.0.1:7400")
    box.sh("sed -i 's/^SKUEUE_LEAVE_ON_STOP=no$/SKUEUE_LEAVE_ON_STOP=yes/' /etc/skueue/skueued.env"
           " && systemctl stop skueued", check=True)  # fmt: skip
    left = box.unit("ActiveState", "Result", "ExecMainStatus")
    assert left == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
    journal = box.journal()
    assert "SKUEUE_LEAVE_ON_STOP=yes: 127.0.0.1:7400 leaves its cluster" in journal
    assert "left the cluster; its data is held by the others" in journal
    stats = client(box, "stats --node 127.0.0.1:7401")
    assert "processes: 1" in stats.stdout, stats
    assert f"queue size: {ELEMENTS - 1}" in stats.stdout, stats

    box.sh("systemctl start skueued", check=True)
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while "left its cluster; it cannot come back" not in box.journal():
        assert time.monotonic() < deadline, box.journal()[-3000:]
        time.sleep(0.3)
    print(f"systemd: booted in {booted_s:.1f} s, whole run {time.monotonic() - began:.1f} s")
