"""Ctrl-C during a Spark command: exit 130 quietly, like every other command.

Theory of operation
-------------------
Left to PySpark, a Ctrl-C printed some fifty lines.  Two things made them:

* The terminal sends SIGINT to its whole foreground process group.  PySpark's JVM ignores
  it, but the Python workers it forks for our UDFs restore Python's handler, die in the
  middle of their task, and the executor logs each death as an ERROR with its stack.
  :func:`start_jvm_apart` starts the JVM in a session of its own, so the signal reaches
  only the driver.  The JVM still ends with this process: it reads its stdin, a pipe from
  us, until EOF.
* PySpark's own SIGINT handler calls ``cancelAllJobs()`` through py4j from inside the
  signal handler, on the connection the interrupted main thread is blocked on: py4j fails
  with "reentrant call" and logs the tracebacks.  :class:`CtrlC` replaces it: the
  handler never talks to the JVM itself.  A helper thread (py4j gives each thread its own
  connection) silences Spark's log, cancels the jobs and, for a session the command
  started, stops it; the main thread's pending call then returns with an error, which
  becomes the ``KeyboardInterrupt`` that the command turns into exit 130.  Outside a
  JVM call the handler raises ``KeyboardInterrupt`` at once.

A Ctrl-C while the JVM starts takes effect once it is up: interrupting its launch left a
JVM behind that never exited (it had lost the file it reports its port in).  A second
Ctrl-C exits at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXIT_INTERRUPTED: Final = 130
"""128 + SIGINT, as :mod:`skueue.cli.args` (which this layer may not import) says too."""
STOP_WAIT_S: Final = 60.0
"""How long the main thread waits for the helper to cancel and stop before giving up."""


def start_jvm_apart(settings: Mapping[str, str]) -> None:
    """Start the JVM for a classic session with ``settings``, in a session of its own.

    Nothing happens when this process has a JVM already (an earlier session's): PySpark
    keeps one per process and would ignore a second.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None:
        return
    conf = SparkConf()
    for key, value in settings.items():
        conf.set(key, value)
    # popen_kwargs is PySpark's hook for customising how the JVM is spawned.
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def in_jvm_call(frame: FrameType | None) -> bool:
    """Whether the interrupted thread was waiting on py4j (an answer from the JVM)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j."):
            return True
        frame = frame.f_back
    return False


def _cancel_quietly(spark: SparkSession, stop: bool) -> None:
    """Silence Spark's log, cancel its jobs and, when ``stop``, stop the session."""
    try:
        context = spark.sparkContext
        # Cancelled tasks and a stopping context log ERRORs with stacks: not for a Ctrl-C.
        context.setLogLevel("OFF")
        context.cancelAllJobs()
        if stop:
            spark.stop()
    except Exception:  # noqa: BLE001 - Spark Connect, or a context already going: nothing to do
        pass


class CtrlC:
    """The SIGINT handler of one command's Spark session (see the module docstring)."""

    def __init__(self) -> None:
        self._spark: SparkSession | None = None
        self._owned = False
        self._presses = 0
        self._helper: threading.Thread | None = None

    def on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self._presses += 1
        if self._presses > 1:
            os._exit(EXIT_INTERRUPTED)  # the second Ctrl-C: stop waiting
        if self._spark is None:
            # The JVM is starting: interrupting its launch left it running for good, so
            # the interrupt waits until the session is up (:meth:`watching`).
            return
        self._helper = threading.Thread(
            target=_cancel_quietly, args=(self._spark, self._owned), daemon=True
        )
        self._helper.start()
        if not in_jvm_call(frame):
            raise KeyboardInterrupt

    @contextmanager
    def watching(self, spark: SparkSession, *, owned: bool) -> Iterator[None]:
        """Run the block on ``spark``; a Ctrl-C in it (or while it started) raises
        ``KeyboardInterrupt`` at its end.  ``owned``: the session was started for the
        block, so it is stopped at its end, and a Ctrl-C may stop it sooner."""
        self._spark, self._owned = spark, owned
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self.on_sigint)  # a new context installed PySpark's
        try:
            if self._presses:
                _cancel_quietly(spark, stop=False)
                raise KeyboardInterrupt
            yield
        except BaseException:
            # Whatever the cancelled job raised on its way out, the user asked to stop.
            if not self._presses:
                raise
        finally:
            if self._helper is not None:
                self._helper.join(STOP_WAIT_S)
            if owned:
                spark.stop()
        if self._presses:
            raise KeyboardInterrupt


@contextmanager
def quiet_ctrl_c() -> Iterator[CtrlC]:
    """Handle Ctrl-C for a command's Spark session: start it in the block, then run the
    work in :meth:`CtrlC.watching`.  The SIGINT handler found is put back at the end.
    Only the main thread can handle signals; elsewhere the block runs as it is."""
    ctrl_c = CtrlC()
    if threading.current_thread() is not threading.main_thread():
        yield ctrl_c
        return
    previous = signal.signal(signal.SIGINT, ctrl_c.on_sigint)
    try:
        yield ctrl_c
    finally:
        signal.signal(signal.SIGINT, previous)
