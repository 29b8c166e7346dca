"""Output files written whole or not at all (``--history FILE`` of bench and sim).

The file is claimed before the run, so that a bad path fails at once, not after a long
run: an existing file is refused unless ``--force`` is given, and a temporary file is
created next to it (same directory, so the final rename is atomic).  Only at the end is
the temporary file written and renamed over the target; a run that fails or is
interrupted removes it and leaves any earlier file untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from types import TracebackType
from typing import IO

from skueue.cli.args import fail


class AtomicOutput:
    def __init__(self, prog: str, path: str, *, force: bool) -> None:
        self.path = path
        if os.path.isdir(path):
            fail(prog, f"{path} is a directory")
        if os.path.lexists(path) and not force:
            fail(prog, f"{path} exists; use --force to replace it")
        directory = os.path.dirname(os.path.abspath(path))
        try:
            fd, self._temp = tempfile.mkstemp(
                dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
            )
        except OSError as e:
            fail(prog, f"cannot write {path}: {e.strerror}")
        os.close(fd)
        self._done = False

    def commit(self, write: Callable[[IO[str]], None]) -> None:
        """Write the content with ``write`` and put the file in place."""
        with open(self._temp, "w", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self._temp, 0o666 & ~umask)  # mkstemp made it private
        os.replace(self._temp, self.path)
        self._done = True

    def discard(self) -> None:
        if not self._done:
            with contextlib.suppress(OSError):
                os.unlink(self._temp)
            self._done = True

    def __enter__(self) -> AtomicOutput:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.discard()
