"""``skueued --config FILE``: every command-line option, in a TOML file.

The keys are the long options without their leading dashes, spelled as on the command
line (``data-dir``, ``value-bytes-max``, ``id``), so that one vocabulary serves both.
They are derived from the parser itself: an option added to ``skueued`` later (TLS
files, ``--metrics``) is a key of the file at once, checked by the same ``type`` and
``choices`` as on the command line, with no code here.

- A value given on the command line wins over the file's.
- A flag (``--in-memory``) takes ``true`` or ``false``; an option that takes a list
  spelled ``ADDR,...`` also takes a TOML array of strings; a number may be a TOML
  integer or a string.
- An unknown key, a table, or a value the option refuses is one line naming the key
  (exit 2), never a traceback.  A key spelled with ``_`` gets a hint to use ``-``.

``--print-config`` prints the effective configuration (the file, the command line and
the defaults together) as TOML that ``--config`` reads back.
"""

from __future__ import annotations

import argparse
import difflib
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from skueue.cli.args import Parser, fail

CONFIG_FILE_BYTES_MAX: Final = 1024 * 1024
"""A configuration file larger than this is refused unread (it is a few hundred bytes)."""
NOT_IN_FILE: Final = frozenset({"help", "version", "config", "print-config"})
"""Options about the file or the program itself, never keys of the file."""


class ConfigError(Exception):
    """A configuration file that cannot be used; the message is one line."""


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read options from this TOML file, keys named as the long options without "
        'their dashes (data-dir = "..."); the command line wins over it',
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration as TOML (--config reads it back) and exit",
    )


def file_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every key the file may hold, with the option it stands for."""
    keys: dict[str, argparse.Action] = {}
    for action in parser._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if not long or action.help == argparse.SUPPRESS:
            continue
        key = long[0][2:]
        if key not in NOT_IN_FILE:
            keys[key] = action
    return keys


def parse_args(parser: Parser, argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    """Parse ``argv`` over the defaults of the ``--config`` file it names, if any."""
    pre = Parser(prog=prog, add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    if known.config is not None:
        try:
            use_file(parser, Path(known.config))
        except ConfigError as e:
            fail(prog, str(e))
    args = parser.parse_args(argv)
    if args.config != known.config:
        fail(prog, "--config: spell it out in full, once")
    return args


def use_file(parser: argparse.ArgumentParser, path: Path) -> None:
    """Make the file's values the parser's defaults (so that the command line wins)."""
    table = read_file(path)
    options = file_options(parser)
    defaults: dict[str, Any] = {}
    for key, value in table.items():
        action = options.get(key)
        if action is None:
            raise ConfigError(f"{path}: {unknown(key, options)}")
        try:
            defaults[action.dest] = convert(action, value)
        except ConfigError as e:
            raise ConfigError(f"{path}: {key}: {e}") from None
        # Given in the file, a required option is no longer missing.
        action.required = False
    parser.set_defaults(**defaults)


def read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = f.read(CONFIG_FILE_BYTES_MAX + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > CONFIG_FILE_BYTES_MAX:
        raise ConfigError(f"{path}: larger than {CONFIG_FILE_BYTES_MAX} bytes")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def unknown(key: str, options: dict[str, argparse.Action]) -> str:
    spelled = key.replace("_", "-")
    if spelled in options:
        return f"unknown key {key!r} (keys are spelled with '-': {spelled!r})"
    close = difflib.get_close_matches(key, list(options), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(options)}"
    return f"unknown key {key!r} ({hint})"


def convert(action: argparse.Action, value: Any) -> Any:
    """The file's ``value`` as the command line would have given it to the program."""
    if isinstance(value, dict):
        raise ConfigError("expected a value, not a table")
    if isinstance(action, argparse.BooleanOptionalAction):  # --x / --no-x: as written
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, not {shown(value)}")
        return value
    if action.nargs == 0:  # a flag: true sets it, false leaves the default
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, not {shown(value)}")
        return action.const if value else action.default
    if isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+"):
        if not isinstance(value, list):
            raise ConfigError(f"expected an array, not {shown(value)}")
        return [one(action, v) for v in value]
    if isinstance(value, list) and str(action.metavar or "").endswith(",..."):
        if not all(isinstance(v, str) for v in value):
            raise ConfigError("expected an array of strings")
        value = ",".join(value)
    return one(action, value)


def one(action: argparse.Action, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"expected a string or a number, not {shown(value)}")
    text = value if isinstance(value, str) else str(value)
    try:
        converted = action.type(text) if callable(action.type) else text
    except (argparse.ArgumentTypeError, TypeError, ValueError) as e:
        raise ConfigError(str(e) or f"invalid value {text!r}") from None
    if action.choices is not None and converted not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ConfigError(f"{text!r} is not one of {choices}")
    return converted


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "an array"
    return repr(value)[:60]


def render(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The effective configuration as TOML; options with no value are comments."""
    lines = ["# skueued's effective configuration (skueued --config FILE reads it back)"]
    for key, action in file_options(parser).items():
        value = getattr(args, action.dest, None)
        if value is None:
            lines.append(f"# {key} = (not set)")
        else:
            lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return toml_string(str(value))


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        elif 0xD800 <= ord(c) <= 0xDFFF:
            raise ConfigError(f"{text!r} is not valid UTF-8")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
