"""One daemon per data directory: a lock file holding the PID of the daemon that uses it.

Two daemons on one directory would interleave their input logs and page files and
corrupt both; the entry store has its own lock, but it is taken late (after the input log
was read, and its meta file maybe written) and says only that the store "is open in
another store".  So the daemon takes this lock first, before it reads or writes anything
in the directory, and a second one is told which process holds it.

``fcntl.flock`` on an open file: the kernel releases it when the holder exits, however
it exits, so a crash never leaves the directory locked; the file itself stays (removing
it would race with the next daemon taking it).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from skueue.runtime.errors import DaemonError

LOCK_FILE = "skueued.lock"
PID_BYTES_MAX = 32  # a PID and a newline; more in the file is not ours


class DataDirLock:
    """An exclusive lock on a data directory, held until :meth:`release`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        path = directory / LOCK_FILE
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DaemonError(f"cannot use {directory} as the data directory: {e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_in(fd)
            os.close(fd)
            who = "another skueued" if holder is None else f"another skueued (PID {holder})"
            raise DaemonError(
                f"{who} is using the data directory {directory}: stop it first, or give "
                "this daemon its own --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the file releases the flock
            self.fd = None


def _pid_in(fd: int) -> int | None:
    """The PID the holder wrote, if the file says one."""
    try:
        text = os.pread(fd, PID_BYTES_MAX, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
