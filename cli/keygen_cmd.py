"""``skueue keygen``: a new cluster key for ``skueued --cluster-key`` (issue 13).

Prints the key (64 hex digits) on stdout, or with ``--out FILE`` writes it there,
readable by its owner only (mode 0600), refusing to replace a file unless ``--force``.
To roll a cluster over to a new key, see "Peer authentication" in the README.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from skueue.cli.args import fail
from skueue.runtime.security.peer_auth import generate_key


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "keygen",
        help="make a cluster key for skueued --cluster-key",
        description="Print a new cluster key, or write it to --out FILE (mode 0600).",
    )
    p.add_argument("--out", metavar="FILE", help="write the key here instead of stdout")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.set_defaults(run=run_keygen)


def run_keygen(args: argparse.Namespace) -> int:
    line = generate_key() + "\n"
    if args.out is None:
        sys.stdout.write(line)
        return 0
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if args.force else os.O_EXCL)
    try:
        fd = os.open(args.out, flags, 0o600)
    except FileExistsError:
        fail("skueue keygen", f"{args.out} exists: pass --force to replace it")
    except OSError as e:
        fail("skueue keygen", f"cannot write {args.out}: {e.strerror}")
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # also when --force replaced a wider file
        f.write(line)
    print(f"wrote a new cluster key to {args.out}", file=sys.stderr)
    return 0
