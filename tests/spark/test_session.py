"""Master selection: never hard-coded; flag, SPARK_REMOTE, spark-submit, then local[*].

These need no JVM, so they are not marked ``spark``.
"""

from __future__ import annotations

import pytest

from skueue.analysis.session import (
    MasterError,
    MasterPlan,
    parse_conf,
    partitions_for,
    plan_master,
    session_conf,
)


@pytest.mark.parametrize(
    ("master", "env", "expected"),
    [
        ("local[2]", {}, MasterPlan("classic", "local[2]", "--master")),
        ("spark://head:7077", {}, MasterPlan("classic", "spark://head:7077", "--master")),
        ("sc://head:15002", {}, MasterPlan("connect", "sc://head:15002", "--master")),
        # The flag beats the environment.
        ("local[*]", {"SPARK_REMOTE": "sc://x:1"}, MasterPlan("classic", "local[*]", "--master")),
        (None, {"SPARK_REMOTE": "sc://x:1"}, MasterPlan("connect", "sc://x:1", "SPARK_REMOTE")),
        (None, {"PYSPARK_GATEWAY_PORT": "4242"}, MasterPlan("submit", None, "spark-submit")),
        (None, {}, MasterPlan("classic", "local[*]", "default")),
    ],
)
def test_master_plan(master: str | None, env: dict[str, str], expected: MasterPlan) -> None:
    assert plan_master(master, env) == expected


def test_unknown_master_is_one_clear_error() -> None:
    with pytest.raises(MasterError, match="unknown master 'http://x'"):
        plan_master("http://x", {})


def test_launch_settings_only_for_a_jvm_we_start() -> None:
    conf = {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"}
    local = session_conf(plan_master("local[2]", {}), conf)
    assert local["spark.driver.memory"] == "4g"
    assert local["spark.driver.bindAddress"] == "127.0.0.1"
    assert local["spark.sql.shuffle.partitions"] == "8"  # the caller's setting wins
    # Sized from the input later (partitions_for), not fixed per master here.
    assert "spark.sql.shuffle.partitions" not in session_conf(plan_master("local[3]", {}), {})
    remote = session_conf(plan_master("sc://h:1", {}), conf)
    assert "spark.driver.memory" not in remote
    assert "spark.driver.bindAddress" not in remote
    assert remote["spark.sql.shuffle.partitions"] == "8"
    cluster = session_conf(plan_master("spark://h:7077", {}), conf)
    assert "spark.driver.bindAddress" not in cluster  # executors must reach the driver
    assert cluster["spark.ui.showConsoleProgress"] == "false"  # no bar over our progress


def test_partitions_follow_the_input_up_to_two_per_core() -> None:
    assert partitions_for(0, 8) == 1
    assert partitions_for(324, 64) == 1  # a small history is one task per stage, not 200
    assert partitions_for(250_000, 64) == 3
    assert partitions_for(10_000_000, 2) == 4
    assert partitions_for(10_000_000, 1000) == 100


def test_conf_items() -> None:
    assert parse_conf(["a=b", "c.d = e=f"]) == {"a": "b", "c.d": " e=f"}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_conf(["nonsense"])
