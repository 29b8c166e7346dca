"""Which Spark master to use, and the session built for it.

The master is never hard-coded.  In order of precedence:

1. ``--master URL``: ``sc://...`` is Spark Connect (``builder.remote``); anything else
   (``local[N]``, ``local[*]``, ``spark://``, ``yarn``, ``k8s://``) is a classic master
   (``builder.master``).
2. ``SPARK_REMOTE`` in the environment: Spark Connect at that URL.
3. Running under ``spark-submit`` (it starts the Python driver with
   ``PYSPARK_GATEWAY_PORT`` set): the master ``spark-submit --master`` chose.
4. Otherwise ``local[*]``: every core of this machine.

Shuffle partitions are sized from the input (:func:`sized_shuffle_partitions`), on every
kind of master: Spark's default of 200 is a fixed guess that made a few hundred tiny
tasks per stage out of a history of a few hundred records on a standalone cluster.  A
value the user (``--conf``, ``spark-submit --conf``) or a caller's session set is kept.

Launch settings (driver memory, JVM options, the UI, the bind address) only mean
something when this process starts the JVM, so they are dropped for Spark Connect and for
``spark-submit``, where the server or the submitter owns them; SQL settings apply to
every kind of session.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import attrs

from skueue.analysis.ctrl_c import quiet_ctrl_c, start_jvm_apart

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_DEFAULT: Final = "local[*]"
CLASSIC_PREFIXES: Final = ("local", "spark://", "yarn", "k8s://", "mesos://")
CONNECT_PREFIX: Final = "sc://"

SHUFFLE_PARTITIONS: Final = "spark.sql.shuffle.partitions"
ROWS_PER_PARTITION: Final = 100_000
"""Input rows per shuffle partition before another one pays for its task (~0.1 s each)."""
PARTITIONS_PER_CORE_MAX: Final = 2

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
    # The commands print their own progress; Spark's bar would garble it.
    out: dict[str, str] = {"spark.ui.showConsoleProgress": "false"}
    if plan.local:
        # A local driver talks only to itself: binding to loopback avoids a slow or failing
        # lookup of this host's name, and nobody else needs the web UI of a batch job.
        out |= {
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
        }
    # Our Python UDFs are few and row-at-a-time; without pyarrow Spark would warn on each.
    out["spark.sql.execution.pythonUDF.arrow.enabled"] = "false"
    out |= conf
    if plan.kind != "classic":
        out = {k: v for k, v in out.items() if not k.startswith(_LAUNCH_PREFIXES)}
    return out


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
    settings = session_conf(plan, conf or {})
    builder = SparkSession.builder.appName(app_name)
    if plan.kind == "connect":
        assert plan.url is not None
        builder = builder.remote(plan.url)
    elif plan.url is not None:
        builder = builder.master(plan.url)
        start_jvm_apart({"spark.master": plan.url, "spark.app.name": app_name, **settings})
    for key, value in settings.items():
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


@attrs.frozen
class Started:
    """A session as a command holds it: the session and the master it really runs on."""

    spark: SparkSession
    master: str
    """:func:`describe_master`'s text, for the report and the progress lines."""


@contextmanager
def started_session(
    master: str | None = None,
    *,
    app_name: str = "skueue",
    conf: Mapping[str, str] | None = None,
) -> Iterator[Started]:
    """Start (or reuse) the session for ``master`` for the block; stop it after, if ours.

    A session that was already running when the block began (a test's, a notebook's)
    is reused and left running; one this block started is stopped when it ends, also on
    an error.  Raises :class:`MasterError` for an unknown master, before anything starts.
    Ctrl-C in the block raises a plain ``KeyboardInterrupt`` and prints nothing
    (:func:`~skueue.analysis.ctrl_c.quiet_ctrl_c`).
    """
    from pyspark.sql import SparkSession

    plan = plan_master(master)
    existed = SparkSession.getActiveSession() is not None
    with quiet_ctrl_c() as ctrl_c:
        spark = build_session(master, app_name=app_name, conf=conf)
        with ctrl_c.watching(spark, owned=not existed):
            yield Started(spark, describe_master(spark, plan))


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


def partitions_for(rows: int, cores: int) -> int:
    """Shuffle partitions for ``rows`` input rows on ``cores`` cores.

    One per :data:`ROWS_PER_PARTITION` rows (so a small history is one task per stage,
    not 200), at most :data:`PARTITIONS_PER_CORE_MAX` per core (more only queue up).
    """
    wanted = math.ceil(max(0, rows) / ROWS_PER_PARTITION)
    return max(1, min(PARTITIONS_PER_CORE_MAX * max(1, cores), wanted))


def partitions_fixed(spark: SparkSession) -> bool:
    """Whether the session was launched with a shuffle-partition setting (ours to keep)."""
    try:
        return bool(spark.sparkContext.getConf().contains(SHUFFLE_PARTITIONS))
    except Exception:  # Spark Connect: no SparkContext; the caller knows its own --conf.
        return False


def cores_of(spark: SparkSession) -> int:
    """The cores the session's executors offer (Spark's default parallelism)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect: the server's setting is the best guess there is.
        return shuffle_partitions(spark)


@contextmanager
def sized_shuffle_partitions(
    spark: SparkSession, rows: int, *, fixed: bool = False
) -> Iterator[int]:
    """Set ``spark.sql.shuffle.partitions`` from the input size for the block; yield it.

    Kept as it is when ``fixed`` (the user passed it) or the session was launched with
    it; restored afterwards, since the session may be a caller's.
    """
    if fixed or partitions_fixed(spark):
        yield shuffle_partitions(spark)
        return
    before = spark.conf.get(SHUFFLE_PARTITIONS) or "200"
    n = partitions_for(rows, cores_of(spark))
    spark.conf.set(SHUFFLE_PARTITIONS, str(n))
    try:
        yield n
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, before)
