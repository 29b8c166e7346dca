"""The PySpark data pipeline: histories and daemon logs in; checks, tables and plots out.

Theory of operation
-------------------
Everything here runs on Spark through the DataFrame API only, so one code path serves
``local[*]`` on a laptop, a ``spark://`` cluster and a Spark Connect (``sc://``) server,
which has no RDD API.  The driver holds nothing whose size grows with the input: it
collects only small aggregates (per-file counts, percentiles, histogram bins, the first
violation of each kind) and, for histories of at most ``EXACT_OPS_MAX`` operations, the
records the exact checker needs.

- :mod:`.session`: which master, and the session built for it.
- :mod:`.readers`: text lines in; strict history records, log events, lease events and
  malformed lines out.
- :mod:`.leases`: the lease events' per-element checks and summary.
- :mod:`.scan`: the two distributed primitives the checks are made of (a prefix scan in a
  global order, and the dyadic cover of an index range).
- :mod:`.certificate`, :mod:`.patterns`, :mod:`.lifo`: the checkers of
  :mod:`skueue.check.checker` re-expressed as joins, aggregations and scans.
- :mod:`.checks`: one verdict per history and model, decided as :func:`skueue.check.checker.check`
  decides it.
- :mod:`.stats`, :mod:`.plots`, :mod:`.pipeline`: ``skueue analyze``, which fills a
  :class:`.result.Analysis` that :mod:`.report` renders.
- :mod:`.experiment`: ``skueue experiment``, the paper's sweeps as Spark tasks (its
  tables and CSV files are :mod:`skueue.sim.results`, shared with the benchmark).
- ``skueue.cli.spark_submit``: the ``.py`` entry file ``spark-submit`` needs for both
  commands.

Nothing in :mod:`skueue` outside this package imports it, so the core never needs a JVM.
"""
