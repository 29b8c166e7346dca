"""The e2e fixture: real ``skueued`` subprocesses, always cleaned up.

``skueued_cluster(n, structure="queue")`` starts ``n`` daemons on 127.0.0.1 as a static
cluster (see :mod:`tests.e2e.daemons` for how ports are picked and readiness is awaited)
and returns a :class:`~tests.e2e.daemons.Cluster` with ``.addresses`` and ``.procs``.

Teardown sends SIGTERM, waits a bounded time, SIGKILLs what is left, and fails the test
if a daemon had to be killed, left a process behind, survived, or exited non-zero on
SIGTERM.  A test that stops a daemon itself checks that daemon's exit on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.e2e.daemons import Cluster, Daemon, start_cluster, stop_and_check


@pytest.fixture
def skueued_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Cluster]]:
    """A factory: ``skueued_cluster(n, structure="queue", extra_args=())`` -> Cluster."""
    started: list[Daemon] = []

    def start(n: int, structure: str = "queue", extra_args: tuple[str, ...] = ()) -> Cluster:
        return start_cluster(n, structure, tmp_path_factory.mktemp("skueued"), started, extra_args)

    yield start
    stop_and_check(started)
