"""Which Spark master to use, and the session built for it.

The master is never hard-coded.  In order of precedence:

1. ``--master URL``: ``sc://...`` is Spark Connect (``builder.remote``); anything else
   (``local[N]``, ``local[*]``, ``spark://``, ``yarn``, ``k8s://``) is a classic master
   (``builder.master``).
2. ``SPARK_REMOTE`` in the environment: Spark Connect at that URL.
3. Running under ``spark-submit`` (it starts the Python driver with
   ``PYSPARK_GATEWAY_PORT`` set): the master ``spark-submit --master`` chose.
4. Otherwise ``local[*]``: every core of this machine.

Launch settings (driver memory, JVM options, the UI, the bind address) only mean
something when this process starts the JVM, so they are dropped for Spark Connect and for
``spark-submit``, where the server or the submitter owns them; SQL settings apply to
every kind of session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_DEFAULT: Final = "local[*]"
CLASSIC_PREFIXES: Final = ("local", "spark://", "yarn", "k8s://", "mesos://")
CONNECT_PREFIX: Final = "sc://"

# Settings that only take effect when we launch the driver JVM ourselves.
_LAUNCH_PREFIXES: Final = ("spark.driver.", "spark.executor.", "spark.ui.", "spark.jars")


class MasterError(ValueError):
    """The master URL names no kind of Spark deployment we know."""


@attrs.frozen
class MasterPlan:
    """How the session will be built."""

    kind: str
    """``"classic"`` (``builder.master``), ``"connect"`` (``builder.remote``) or
    ``"submit"`` (whatever ``spark-submit`` configured)."""
    url: str | None
    """The master or remote URL; None for ``"submit"``."""
    source: str
    """Where the choice came from: ``"--master"``, ``"SPARK_REMOTE"``, ``"spark-submit"``
    or ``"default"``."""

    @property
    def local(self) -> bool:
        return self.kind == "classic" and self.url is not None and self.url.startswith("local")

    def describe(self) -> str:
        """E.g. ``connect sc://spark:15002 (from SPARK_REMOTE)``."""
        return f"{self.kind} {self.url or '(set by spark-submit)'} (from {self.source})"


def plan_master(master: str | None, environ: Mapping[str, str] | None = None) -> MasterPlan:
    """Decide the master from the flag and the environment (see the module docstring)."""
    env = os.environ if environ is None else environ
    if master:
        if master.startswith(CONNECT_PREFIX):
            return MasterPlan("connect", master, "--master")
        if master.startswith(CLASSIC_PREFIXES):
            return MasterPlan("classic", master, "--master")
        raise MasterError(
            f"unknown master {master!r}: use local[*], local[N], spark://HOST:PORT, "
            "sc://HOST:PORT (Spark Connect), yarn or k8s://..."
        )
    remote = env.get("SPARK_REMOTE")
    if remote:
        return MasterPlan("connect", remote, "SPARK_REMOTE")
    if env.get("PYSPARK_GATEWAY_PORT"):
        return MasterPlan("submit", None, "spark-submit")
    return MasterPlan("classic", LOCAL_DEFAULT, "default")


def session_conf(plan: MasterPlan, conf: Mapping[str, str]) -> dict[str, str]:
    """The settings worth passing to the builder for this plan."""
    out: dict[str, str] = {}
    if plan.local:
        # Spark's default of 200 shuffle partitions makes a few hundred tiny tasks per
        # stage on one machine; two per core keep every core busy at a fraction of that.
        out["spark.sql.shuffle.partitions"] = str(2 * local_threads(plan.url or ""))
        # A local driver talks only to itself: binding to loopback avoids a slow or failing
        # lookup of this host's name, and nobody else needs the web UI of a batch job.
        out |= {
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            # The commands print their own progress; Spark's bar would garble it.
            "spark.ui.showConsoleProgress": "false",
        }
    # Our Python UDFs are few and row-at-a-time; without pyarrow Spark would warn on each.
    out["spark.sql.execution.pythonUDF.arrow.enabled"] = "false"
    out |= conf
    if plan.kind != "classic":
        out = {k: v for k, v in out.items() if not k.startswith(_LAUNCH_PREFIXES)}
    return out


def local_threads(url: str) -> int:
    """Worker threads of a ``local``, ``local[N]`` or ``local[*]`` master."""
    inner = url.partition("[")[2].partition("]")[0].partition(",")[0]
    if inner.isdigit():
        return max(1, int(inner))
    return (os.cpu_count() or 1) if inner == "*" else 1


def ensure_worker_python(plan: MasterPlan) -> None:
    """Make Python workers run this interpreter unless PYSPARK_PYTHON says otherwise.

    Workers otherwise start the system ``python3``, which lacks the project and its
    dependencies.  On a cluster the same path must exist on every executor (or set
    PYSPARK_PYTHON to the executors' interpreter); a Spark Connect server picks its own.
    """
    if plan.kind != "connect":
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def build_session(
    master: str | None = None,
    *,
    app_name: str = "skueue",
    conf: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> SparkSession:
    """Build (or reuse) the session for ``master``; raises :class:`MasterError`."""
    from pyspark.sql import SparkSession

    plan = plan_master(master, environ)
    ensure_worker_python(plan)
    builder = SparkSession.builder.appName(app_name)
    if plan.kind == "connect":
        assert plan.url is not None
        builder = builder.remote(plan.url)
    elif plan.url is not None:
        builder = builder.master(plan.url)
    for key, value in session_conf(plan, conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if plan.kind != "connect":
        # Spark's INFO/WARN chatter would bury the one-line progress we print.
        session.sparkContext.setLogLevel("ERROR")
    return session


def describe_master(session: SparkSession, plan: MasterPlan) -> str:
    """The master the session really runs on (a reused session may differ from the plan)."""
    try:
        return f"{session.sparkContext.master} (from {plan.source})"
    except Exception:  # Spark Connect: no SparkContext on the client.
        return plan.describe()


def stop_if_ours(session: SparkSession, existed: bool) -> None:
    """Stop ``session`` unless it was already running when the command began (a test's)."""
    if not existed:
        session.stop()


def active_session_exists() -> bool:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def parse_conf(items: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` from repeated ``--conf`` flags; raises ValueError on a bad item."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {item!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def shuffle_partitions(spark: SparkSession) -> int:
    """``spark.sql.shuffle.partitions``: our unit of parallelism (also readable over Connect)."""
    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or "200"))
    except ValueError:
        return 200
