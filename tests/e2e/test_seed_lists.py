"""A seed list in ``--node`` (issue 28, item 1): ``--node A,B`` once split at the list's
last colon (``cannot reach skueued at [A: Name or service not known; ...]:PORT``) in every
command but ``top``.  Each command, on real daemons, now takes the first member that
answers: the first one down, or both up."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from tests.e2e.daemons import Cluster, free_ports
from tests.e2e.test_cli import (
    ROOT,
    RUN_TIMEOUT_S,
    dead_address,
    environment,
    skueue,
    skueue_command,
)

StartCluster = Callable[..., Cluster]


def ok(*args: str) -> str:
    out = skueue(*args)
    err = out.stderr.decode(errors="replace")
    assert out.returncode == 0, f"skueue {' '.join(args)}: {err}"
    assert "Traceback" not in err, err
    return str(out.stdout.decode(errors="replace"))


def test_every_command_takes_the_first_member_of_a_seed_list_that_answers(
    skueued_cluster: StartCluster,
) -> None:
    first, second = skueued_cluster(2).addresses
    down_first = f"{dead_address()},{first}"
    both_up = f"{first},{second}"  # the issue's own case
    for seeds in (down_first, both_up):
        node = ["--node", seeds]
        ok("create", "jobs", *node)
        ok("enqueue", "-q", "jobs", "a", "b", "c", *node)
        assert ok("peek", "-q", "jobs", *node) == "a\n"
        assert ok("dequeue", "-q", "jobs", *node) == "a\n"
        assert ok("consume", "jobs", "-n", "1", *node) == "b\n"
        ok("dlq", "jobs", *node)
        assert "processes: 2" in ok("stats", *node)
        assert ok("health", *node).strip() == "ready"
        assert "members" in ok("top", "--once", "--interval", "0.2", *node)
        ok("delete", "jobs", *node)


def test_skueue_node_takes_a_seed_list_whose_first_member_is_down(
    skueued_cluster: StartCluster,
) -> None:
    node = skueued_cluster(1).addresses[0]
    env = {**environment(), "SKUEUE_NODE": f"{dead_address()},{node}"}
    for args in (["enqueue", "x"], ["dequeue"], ["stats"], ["health"]):
        out = subprocess.run(
            [*skueue_command(), *args], capture_output=True, cwd=ROOT, env=env,
            timeout=RUN_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert out.returncode == 0, (args, out.stderr)


def test_a_seed_list_with_no_member_up_names_each_in_one_line() -> None:
    dead = [f"127.0.0.1:{port}" for port in free_ports(2)]
    out = skueue("enqueue", "--node", ",".join(dead), "x")
    err = out.stderr.decode(errors="replace").strip()
    assert out.returncode == 1, err
    assert len(err.splitlines()) == 1, err
    assert "no member of the seed list answered" in err
    for address in dead:
        assert f"cannot reach skueued at {address}:" in err, err


def test_a_bad_member_of_a_seed_list_is_a_usage_error_naming_it() -> None:
    out = skueue("dequeue", "--node", f"{dead_address()},nonsense")
    err = out.stderr.decode(errors="replace").strip()
    assert out.returncode == 2 and len(err.splitlines()) == 1, err
    assert "bad address 'nonsense'" in err, err


def test_leave_and_join_act_on_one_daemon_and_refuse_a_seed_list(
    skueued_cluster: StartCluster,
) -> None:
    """A seed list would make whichever member answers first leave: ``leave`` and ``join``
    take one address, from ``--node`` or ``$SKUEUE_NODE``, and refuse a list with one
    line (exit 2) before anything happens.  Given one, ``leave`` names the daemon."""
    cluster = skueued_cluster(2)
    first, second = cluster.addresses
    for command in (["leave"], ["join", first]):
        out = skueue(*command, "--node", f"{first},{second}")
        err = out.stderr.decode(errors="replace").strip()
        assert out.returncode == 2 and len(err.splitlines()) == 1, err
        env = {**environment(), "SKUEUE_NODE": f"{first},{second}"}
        listed = subprocess.run([*skueue_command(), *command], env=env, capture_output=True,
                                timeout=RUN_TIMEOUT_S, cwd=ROOT)
        err = listed.stderr.decode(errors="replace").strip()
        assert listed.returncode == 2 and "acts on one" in err, err
    assert all(d.proc.poll() is None for d in cluster.daemons)  # nobody left
    out = skueue("leave", "--node", second)
    err = out.stderr.decode(errors="replace")
    assert out.returncode == 0, err
    assert err.strip() == f"{second} left: its data is held by the other daemons", err
    assert cluster.daemons[1].proc.wait(timeout=30) == 0
