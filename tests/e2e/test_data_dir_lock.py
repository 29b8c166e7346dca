"""One data directory, one daemon (issue 28, item 17): a second ``skueued`` started on a
directory in use is refused before it reads or writes anything there, with one line that
says another skueued (and its PID) is using it; the first serves on."""

from __future__ import annotations

from pathlib import Path

import skueue
from tests.e2e.daemons import HOST, free_ports, refused, spawn, stop, wait_ready


def test_a_second_daemon_on_a_data_directory_in_use_is_told_who_uses_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first_port, second_port = free_ports(2)
    first = spawn(["--listen", f"{HOST}:{first_port}", "--data-dir", str(data)], tmp_path, "first")
    try:
        wait_ready([first])
        with skueue.connect_blocking(first.address) as q:
            q.enqueue(b"kept")
        meta_before = (data / "meta.json").read_bytes()
        # The same id as the first (its own address is another): refused for the lock,
        # not for "holds the data of another process" or the entry store.
        for extra in ((), ("--id", f"{HOST}:{first_port}")):
            args = ["--listen", f"{HOST}:{second_port}", "--data-dir", str(data), *extra]
            code, err = refused(args, tmp_path, f"second{len(extra)}")
            assert code == 1, err
            said = err.strip().splitlines()[-1]
            assert said.startswith("skueued: error: "), err
            assert f"another skueued (PID {first.pid}) is using" in said and str(data) in said, err
            assert "entry store" not in err and "Traceback" not in err, err
        assert (data / "meta.json").read_bytes() == meta_before
        with skueue.connect_blocking(first.address) as q:
            assert q.dequeue() == b"kept"
    finally:
        assert not stop([first]), first.stderr()
    # Stopped, it left the directory free: the next daemon takes it.
    again = spawn(["--listen", f"{HOST}:{first_port}", "--data-dir", str(data)], tmp_path, "again")
    try:
        wait_ready([again])
    finally:
        assert not stop([again]), again.stderr()
