"""Test-suite wide settings: hypothesis profiles, the Spark session, and which tests run
on one xdist worker.

``quick`` (the default, used by CI) keeps the suite fast; ``long`` runs the property
tests for real (select it with SKUEUE_PROFILE=long).  Every profile prints the blob that
replays a failing example, and our generators print their seeds too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

settings.register_profile(
    "quick",
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=5_000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("SKUEUE_PROFILE", "quick"))

# Starting a JVM costs seconds, so every Spark test shares one session: ``local[2]``, no
# UI, two shuffle partitions, bound to loopback, and a JIT set for short runs (C1 only,
# serial GC), which starts a few seconds faster than the default for jobs this small.
# A test that runs ``skueue analyze`` in this process asks for it too (the command reuses
# a running session): on a session of its own, with Spark's defaults, the same analysis
# took 40 to 80 s instead of a few.
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from skueue.analysis.session import started_session

    with started_session("local[2]", app_name="skueue-tests", conf=SPARK_TEST_CONF) as session:
        yield session.spark


# The suite runs on two pytest-xdist workers (scripts/test: -n 2 --dist loadgroup).  Tests
# that share something beyond their own temporary directory and loopback ports run on one
# worker, one after the other:
# - the network-namespace tests: one subnet (10.213.0.0/24) and namespace prefixes; the
#   systemd unit's test boots a container the same way;
# - the tests that install and start peers (redis-server, rabbitmq-server through apt:
#   one dpkg lock);
# - the fault tests: each loads the machine with a cluster and eight clients, and their
#   bounds (serving again within 10 s) hold with one such load at a time, not two;
# - the Spark tests (marked ``spark``): one JVM and its session, not one per worker.
SHARED_RESOURCE_GROUPS = {
    "netns": (
        "tests/e2e/test_netns.py",
        "tests/e2e/test_netns_partition.py",
        "tests/e2e/test_netns_lifecycle.py",
        "tests/e2e/test_deploy.py",
        "tests/e2e/test_systemd_unit.py",
    ),
    "peers": (
        "tests/e2e/test_bench_scale_out.py",
        "tests/e2e/test_priority_bench.py",
        "tests/e2e/test_top.py",
    ),
    "faults": ("tests/faults/",),
}


def shared_resource_group(nodeid: str) -> str | None:
    """The group of the test ``nodeid`` (its path is relative to the checkout), if any."""
    for group, prefixes in SHARED_RESOURCE_GROUPS.items():
        if nodeid.startswith(prefixes):
            return group
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = shared_resource_group(item.nodeid)
        if group is None and item.get_closest_marker("spark") is not None:
            group = "spark"
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
