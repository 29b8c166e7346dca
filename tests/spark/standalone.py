"""A real Spark standalone cluster on loopback for one test: a master and one worker.

Both are the JVM classes the pyspark wheel ships (``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), bound to 127.0.0.1 on
ports they pick themselves (port 0; the master's URL is read from its log), each in its
own process group so that stopping them also stops the executors the worker started.
Every wait is bounded; everything started is stopped on the way out, also on failure.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Final

import pyspark

SPARK_HOME: Final = Path(pyspark.__file__).parent
START_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 15.0
# Small JVMs: the master and worker only coordinate, the executor runs a tiny job.
DAEMON_MEMORY: Final = "256m"
WORKER_MEMORY: Final = "1g"
MASTER_URL: Final = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
WORKER_READY: Final = re.compile(r"Successfully registered with master")


def loopback_env(work: Path) -> dict[str, str]:
    """Environment for the cluster's JVMs and for a driver that talks to them."""
    env = dict(os.environ)
    env |= {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_LOG_DIR": str(work / "logs"),
        # No conf directory of the machine's may change what the test runs.
        "SPARK_CONF_DIR": str(work / "conf"),
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }
    (work / "conf").mkdir(parents=True, exist_ok=True)
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_TIMEOUT_S)


def _wait_for(pattern: re.Pattern[str], log: Path, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = pattern.search(text)
        if found:
            return found.group(found.lastindex or 0)
        if proc.poll() is not None:
            raise RuntimeError(f"{log.stem} exited with {proc.returncode}:\n{text[-2000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"{log.stem} not ready in {START_TIMEOUT_S:.0f} s:\n"
                       f"{log.read_text(errors='replace')[-2000:]}")


@contextmanager
def standalone_cluster(work: Path, cores: int = 2) -> Iterator[str]:
    """Start a master and a worker with ``cores`` cores; yield the master URL."""
    env = loopback_env(work)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    with ExitStack() as stack:

        def start(name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
            log = work / f"{name}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )
            stack.callback(_stop, proc)
            return proc, log

        master, master_log = start(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
        )
        url = _wait_for(MASTER_URL, master_log, master)
        worker, worker_log = start(
            "worker", "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            "--cores", str(cores), "--memory", WORKER_MEMORY, url,
        )
        _wait_for(WORKER_READY, worker_log, worker)
        yield url
