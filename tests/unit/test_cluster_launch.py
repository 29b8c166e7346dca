"""What the launcher reads of its daemons from /proc (skueue/cluster/launch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from skueue.cluster.launch import cpu_seconds


def test_cpu_seconds_counts_what_a_process_spent_and_none_once_it_is_gone() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        first = cpu_seconds(busy.pid)
        deadline = time.monotonic() + 10.0
        later = first
        while later is not None and first is not None and later <= first + 0.05:
            assert time.monotonic() < deadline, "the busy child used no CPU in 10 s"
            time.sleep(0.05)
            later = cpu_seconds(busy.pid)
        assert first is not None and later is not None and later > first >= 0.0
    finally:
        busy.kill()
        busy.wait()
    assert cpu_seconds(busy.pid) is None or busy.pid == os.getpid()
