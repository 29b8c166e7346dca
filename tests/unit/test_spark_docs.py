"""The README's cluster section says what running on a real standalone cluster takes
(issue 28, item 23): the driver's ``SPARK_LOCAL_IP``, and starting the master and the
workers through ``bin/spark-class``, since pip's pyspark ships no ``sbin/start-*.sh``."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def cluster_section() -> str:
    start = README.index("### Running on a real cluster")
    return README[start:README.index("\n### ", start + 1)]


def test_the_cluster_section_names_the_drivers_address() -> None:
    text = cluster_section()
    assert "SPARK_LOCAL_IP" in text
    assert "export SPARK_LOCAL_IP=" in text, "the example sets it for the driver"


def test_the_cluster_section_starts_master_and_workers_with_spark_class() -> None:
    text = cluster_section()
    for role in ("master.Master", "worker.Worker"):
        assert f'"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.{role}' in text, role
    assert "no\n  `sbin/start-master.sh`" in text or "no `sbin/start-master.sh`" in text


def test_what_the_section_says_of_pips_pyspark_is_true() -> None:
    pyspark = pytest.importorskip("pyspark")
    home = Path(pyspark.__file__).parent
    assert (home / "bin" / "spark-class").exists()
    assert not (home / "sbin" / "start-master.sh").exists()
    assert not (home / "sbin" / "start-worker.sh").exists()
