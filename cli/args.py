"""Argument parsing shared by the command-line entry points.

Bad arguments get one clear line on stderr and exit status 2, never a usage dump or a
traceback.  ``--help`` shows every option's default.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, NoReturn

from skueue.host.address import AddressError, parse_address

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C

SPARK_EXTRA: Final = ("pyspark", "matplotlib")
"""What ``pip install 'skueue[spark]'`` adds; ``skueue analyze`` and ``experiment`` need both."""
SPARK_EXTRA_HINT: Final = "needs the spark extra: pip install 'skueue[spark]'"


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help unless the help already names its
    default or there is none worth showing (None, a flag, empty)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.option_strings and "default" not in text and shows(action.default):
            text += " (default: %(default)s)"
        return text


def shows(default: object) -> bool:
    """Whether a default is worth showing: not None, a flag's bool, or empty."""
    if default is None or isinstance(default, bool) or default is argparse.SUPPRESS:
        return False
    return default not in ("", [])


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._negative_values_attached(words), namespace)

    def _negative_values_attached(self, words: list[str]) -> list[str]:
        """``-w -1`` as ``-w=-1``: argparse takes a word that looks like a negative number
        for an option when the parser has one that looks like it too (``-0``), and said
        ``expected one argument`` instead of what is wrong with the value."""
        out: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--":  # what follows is positional, whatever it looks like
                out.extend(words[i:])
                break
            if i + 1 < len(words) and self._takes_a_value(word) and _negative(words[i + 1]):
                out.append(f"{word}={words[i + 1]}")
                i += 2
                continue
            out.append(word)
            i += 1
        return out

    def _takes_a_value(self, word: str) -> bool:
        actions = self._option_string_actions
        action = actions.get(word)
        if action is None and word.startswith("--") and self.allow_abbrev:
            found = {a for name, a in actions.items() if name.startswith(word)}
            action = found.pop() if len(found) == 1 else None
        return action is not None and action.nargs in (None, 1, "?")


def add_version(parser: argparse.ArgumentParser, prog: str) -> None:
    parser.add_argument(
        "--version",
        action="version",
        version=f"{prog} {package_version()}",
        help="print the version",
    )


def package_version() -> str:
    try:
        return version("skueue")
    except PackageNotFoundError:
        return "unknown"


def fail(prog: str, message: str, code: int = EXIT_USAGE) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def require_spark_extra(prog: str) -> None:
    """Exit with one line, not a traceback, when pyspark or matplotlib is not installed.

    ``pip install skueue`` is lean (the daemon, the client and the simulators); the
    Spark commands and the plots come with the ``spark`` extra.
    """
    missing = [name for name in SPARK_EXTRA if not _importable(name)]
    if missing:
        fail(prog, f"{SPARK_EXTRA_HINT} ({' and '.join(missing)} not installed)",
             EXIT_FAILED)


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def address(text: str) -> str:
    """An argparse type: ``HOST:PORT``, checked here so a bad one is a usage error."""
    try:
        return str(parse_address(text))
    except AddressError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def _negative(word: str) -> bool:
    """A word that is a negative number (``-1``, ``-0.5``, ``-inf``), not an option."""
    if not word.startswith("-"):
        return False
    try:
        float(word)
    except ValueError:
        return False
    return True


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, 0 or more (0 often meaning never)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number, 0 or more")
    return value


def seconds_up_to(high_s: float, limit: str) -> Callable[[str], float]:
    """An argparse type: a positive number of seconds, at most ``high_s``, the limit
    named ``limit`` (said with the value over it)."""

    def parse(text: str) -> float:
        value = positive_float(text)
        if value > high_s:
            raise argparse.ArgumentTypeError(
                f"{text} s is over the limit of {high_s:g} s ({limit})"
            )
        return value

    return parse


def integer_in(low: int, high: int | None = None, limit: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` (to ``high``, the limit named
    ``limit``; None: no upper limit)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} must be at least {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text} is over the limit of {high} ({limit})")
        return value

    return parse


positive_int = integer_in(1)
non_negative_int = integer_in(0)


def port_range(text: str) -> tuple[int, int]:
    """``LOW-HIGH``: TCP ports, 1 to 65535, LOW at most HIGH (``7410`` alone: one port)."""
    low, dash, high = text.partition("-")
    try:
        ports = (int(low), int(high if dash else low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH ports, not {text!r:.40}") from None
    if not 1 <= ports[0] <= ports[1] <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r:.40}: ports are 1 to 65535, and LOW at most HIGH"
        )
    return ports


def port_range_text(text: str) -> str:
    """An argparse type: ``text`` once :func:`port_range` takes it (kept as written, so
    that ``--print-config`` writes it as the file reads it back)."""
    port_range(text)
    return text


REPLICA_COUNTS = (1, 3, 5)


def replica_count(text: str) -> int:
    """``--replicas``: a group of 1, 3 or 5 voters (an even one tolerates no more
    failures than the odd one below it, and costs a replica more)."""
    if text not in {str(k) for k in REPLICA_COUNTS}:
        raise argparse.ArgumentTypeError(f"expected 1, 3 or 5, not {text!r:.20}")
    return int(text)
