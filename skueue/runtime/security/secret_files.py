"""The files a daemon reads its secrets from (``--cluster-key``, ``--client-tokens``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from skueue.runtime.errors import DaemonError


def entries(path: Path, flag: str) -> Iterator[tuple[int, str]]:
    """The lines that say something, stripped, with their numbers: blank lines and ``#``
    comments are skipped; a file that cannot be read is one error naming ``flag``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DaemonError(f"{flag} {path}: cannot read it: {e}") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            yield number, line
