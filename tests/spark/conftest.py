"""One Spark session for the whole test run.

Starting a JVM costs seconds, so every Spark test shares one session: ``local[2]``, no
UI, two shuffle partitions, bound to loopback, and a JIT set for short runs (C1 only,
serial GC), which starts a few seconds faster than the default for jobs this small.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from skueue.analysis.session import started_session

TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    with started_session("local[2]", app_name="skueue-tests", conf=TEST_CONF) as session:
        yield session.spark
