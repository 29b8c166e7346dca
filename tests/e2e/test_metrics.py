"""``skueued --metrics``: Prometheus metrics that move under a workload, ``/healthz`` and
``/readyz``, and ``skueue health``'s exit codes (issue 15, items 1 and 2), on real
daemons."""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skueue.client.blocking import connect_blocking
from tests.e2e.daemons import Cluster, Daemon, skueued_command
from tests.e2e.test_cli import skueue as run_skueue

StartCluster = Callable[..., Cluster]
METRICS = ("--metrics", "127.0.0.1:0")
CLOSE_SEEN_S = 10.0  # how long a closed client may still be counted
HTTP_TIMEOUT_S = 10.0
WAIT_S = 20.0

Samples = list[tuple[str, dict[str, str], float]]


def metrics_address(d: Daemon) -> str:
    found = re.search(r"serving metrics\s.*address=(\S+)", d.stderr())
    assert found, d.stderr()
    return found.group(1)


def get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=HTTP_TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(address: str) -> Samples:
    status, body = get(address, "/metrics")
    assert status == 200, body
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(body)
        for s in family.samples
    ]


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` that carry ``labels``."""
    found = [v for n, ls, v in samples if n == name and labels.items() <= ls.items()]
    assert found, f"no {name} {labels} in the scrape"
    return sum(found)


def test_a_scrape_during_a_workload_shows_the_values_moving(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, extra_args=METRICS)  # durable: the fsyncs are counted
    a, b = cluster.addresses
    ma, mb = (metrics_address(d) for d in cluster.daemons)
    with connect_blocking(a) as q:
        q.enqueue_many([b"v%d" % i for i in range(50)], queue="jobs")
        assert len(q.dequeue_many(20, queue="jobs")) == 20
        leased = q.dequeue(queue="jobs", lease=30)
        assert leased is not None and q.ack(leased)
    first = scrape(ma)
    with connect_blocking(a) as q:
        for i in range(100):
            q.enqueue(b"w%d" % i, queue="jobs")
        assert len(q.dequeue_many(110, queue="jobs")) == 110
        assert q.dequeue(queue="none") is None
    second = scrape(ma)

    moving = [
        ("skueue_operations_total", {"op": "insert", "outcome": "ok"}),
        ("skueue_operations_total", {"op": "remove", "outcome": "ok"}),
        ("skueue_operations_total", {"op": "remove", "outcome": "empty"}),
        ("skueue_queue_operations_total", {"queue": "jobs", "op": "insert"}),
        ("skueue_requests_total", {"request": "insert", "outcome": "ok"}),
        ("skueue_request_duration_seconds_count", {"request": "insert"}),
        ("skueue_request_duration_seconds_sum", {"request": "remove"}),
        ("skueue_batch_operations_count", {}),
        ("skueue_batch_cycle_seconds_count", {}),
        ("skueue_batches_total", {}),
        ("skueue_client_connections_total", {}),
        ("skueue_peer_frames_sent_total", {"peer": b}),
        ("skueue_fsync_duration_seconds_count", {}),
        ("skueue_replication_commit_index", {}),
        ("process_cpu_seconds_total", {}),
    ]
    for name, labels in moving:
        assert value(second, name, **labels) > value(first, name, **labels), (name, labels)
    assert value(second, "skueue_operations_total", op="insert", outcome="ok") >= 150
    assert value(second, "skueue_queue_operations_total", queue="none", outcome="empty") == 1
    assert value(second, "skueue_queue_leases_total", queue="jobs", event="leased") == 1
    assert value(second, "skueue_queue_leases_total", queue="jobs", event="acked") == 1
    assert value(second, "skueue_ready") == 1
    assert value(second, "skueue_peer_up", peer=b) == 1
    assert value(second, "skueue_disk_bytes") > 0
    assert value(second, "skueue_replication_term") == 1  # its first life: term 1
    assert value(second, "skueue_replication_replicas") == 1
    assert value(second, "process_resident_memory_bytes") > 10e6
    # The client closed just before the scrape; the daemon counts it gone once its
    # owner took the close, which a busy machine may not have done yet.
    deadline = time.monotonic() + CLOSE_SEEN_S
    while value(scrape(ma), "skueue_client_connections", role="client") != 0:
        assert time.monotonic() < deadline, "a closed client still counted"
        time.sleep(0.05)
    # The depth of a queue is known at the anchor only: 50 - 20 - 1 + 100 - 110.
    anchors = [s for s in (second, scrape(mb)) if value(s, "skueue_member_state", state="anchor")]
    assert len(anchors) == 1
    assert value(anchors[0], "skueue_queue_depth", queue="jobs") == 19


def test_readiness_follows_a_peer_going_down(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, extra_args=METRICS)
    a, b = cluster.addresses
    ma, mb = (metrics_address(d) for d in cluster.daemons)
    assert get(ma, "/healthz") == (200, "alive\n")
    assert get(ma, "/readyz") == (200, "ready\n")
    for where in (["--node", a], ["--metrics", ma]):
        out = run_skueue("health", *where)
        assert (out.returncode, out.stdout) == (0, b"ready\n"), out.stderr

    down = cluster.daemons[1]
    down.proc.terminate()
    assert down.proc.wait(timeout=10) == 0
    deadline = time.monotonic() + WAIT_S
    while get(ma, "/readyz")[0] != 503:
        assert time.monotonic() < deadline, "still ready with its only peer down"
        time.sleep(0.1)
    status, reason = get(ma, "/readyz")
    assert status == 503 and reason.startswith(f"peers unreachable: {b} (down "), reason
    assert get(ma, "/healthz") == (200, "alive\n")  # alive all the same
    for where in (["--node", a], ["--metrics", ma]):
        out = run_skueue("health", *where)
        assert out.returncode == 1, out.stderr
        assert out.stdout.decode().startswith(f"not ready: peers unreachable: {b}")
    for where in (["--node", b], ["--metrics", mb]):  # nobody there: cannot tell
        out = run_skueue("health", *where, "--timeout", "2")
        assert out.returncode == 2 and out.stdout == b"", out
        assert out.stderr.decode().count("\n") == 1, out.stderr
    samples = scrape(ma)
    assert value(samples, "skueue_ready") == 0
    assert value(samples, "skueue_peer_up", peer=b) == 0


@pytest.mark.parametrize(
    "junk",
    [b"\x00" * 20000, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000, b"NOT HTTP\r\n\r\n"],
    ids=["binary", "oversized-head", "garbage"],
)
def test_bad_http_leaves_the_daemon_serving(skueued_cluster: StartCluster, junk: bytes) -> None:
    cluster = skueued_cluster(1, extra_args=(*METRICS, "--in-memory"))
    host, port = metrics_address(cluster.daemons[0]).rsplit(":", 1)
    for _ in range(20):
        with socket.create_connection((host, int(port)), timeout=HTTP_TIMEOUT_S) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                answer = s.recv(100)
            except ConnectionResetError:
                answer = b""  # closed with our bytes unread: a reset, not an answer
        assert answer == b"" or answer.split()[1] in (b"400", b"431"), answer
    assert get(f"{host}:{port}", "/readyz") == (200, "ready\n")
    with connect_blocking(cluster.addresses[0]) as q:
        q.enqueue(b"x")
        assert q.dequeue() == b"x"
    assert cluster.daemons[0].alive()


def test_a_metrics_address_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        where = f"127.0.0.1:{taken.getsockname()[1]}"
        out = subprocess.run(
            [*skueued_command(), "--listen", "127.0.0.1:0", "--in-memory", "--metrics", where],
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert out.returncode == 1, out.stderr
    assert (
        out.stderr.decode()
        .strip()
        .splitlines()[-1]
        .startswith(f"skueued: error: cannot listen on {where}")
    )
