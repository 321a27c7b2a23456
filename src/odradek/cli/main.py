"""The `odradek` command line: a registry of subcommands.

Every module `odradek.cli.<name>` (except this one) that defines `COMMAND` is a subcommand:
`COMMAND: str` (its name), `HELP: str`, `add_arguments(parser)` and `run(args) -> int` (the exit
status). Adding a module adds a command; nothing here changes. Exit status 2 means a usage or
configuration error, as argparse does.

Usage errors are one line on stderr, `odradek groups list: argument --bootstrap-server: ...
(see 'odradek groups list --help')`, whether argparse finds them or a command's `run` raises
`UsageError` for a check argparse cannot express. A flag no option of the command spells is named
(`unrecognized arguments: --lsit`) even when argparse stops first at a required option the typo
kept from being given. Ctrl-C ends a command with status 130 and no traceback; a reader that goes
away (`odradek dump-log ... | head`) ends it quietly with status 141, as SIGPIPE ends a Unix tool
(a command's own error handling lets BrokenPipeError through to here).

Callers: the `odradek` console script and `python -m odradek`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import signal
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

import odradek
import odradek.cli

USAGE_ERROR = 2
INTERRUPTED = 128 + signal.SIGINT
BROKEN_PIPE = 128 + signal.SIGPIPE
_NUMBER = re.compile(r"-\d+(\.\d*)?")


class UsageError(Exception):
    """Raised by a command's `run` for a usage error argparse could not catch; exits 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as one line pointing at --help (odradek.pipeline uses it too),
    naming a misspelled flag rather than the required option it hid."""

    _given: Sequence[str] = ()

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_flags()
        if unknown and "required" in message:
            message = f"unrecognized arguments: {' '.join(unknown)}"
        _usage_error(self.prog, message)
        self.exit(USAGE_ERROR)

    def _unknown_flags(self) -> list[str]:
        """The arguments given (before `--`) that look like flags and start no option of this parser."""
        given = self._given[: self._given.index("--")] if "--" in self._given else self._given
        options = list(self._option_string_actions)
        return [
            arg
            for arg in given
            if arg[:1] in self.prefix_chars
            and len(arg) > 1
            and not _NUMBER.fullmatch(arg)
            and not any(option.startswith(arg.split("=", 1)[0]) for option in options)
        ]


def seconds_option(value: str) -> float:
    """argparse `type=` for a duration option: a positive number of seconds."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def _usage_error(prog: str, message: str) -> None:
    print(f"{prog}: {message} (see '{prog} --help')", file=sys.stderr)


def command_modules() -> list[ModuleType]:
    """The subcommand modules of the odradek.cli package, sorted by command name."""
    modules = []
    for info in pkgutil.iter_modules(odradek.cli.__path__):
        if info.name == "main" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"odradek.cli.{info.name}")
        if hasattr(module, "COMMAND"):
            modules.append(module)
    return sorted(modules, key=lambda m: m.COMMAND)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="odradek", description="Apache Kafka rebuilt in Python.")
    parser.add_argument("--version", action="version", version=f"odradek {odradek.__version__}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        sub = subcommands.add_parser(module.COMMAND, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run, prog=sub.prog)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:  # the reader of stdout went away: nothing more to say, to anyone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush goes nowhere
        return BROKEN_PIPE


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command they were given to, not by the top-level parser
        _usage_error(args.prog, f"unrecognized arguments: {' '.join(unknown)}")
        return USAGE_ERROR
    try:
        return int(args.run(args))
    except UsageError as exc:
        _usage_error(args.prog, str(exc))
        return USAGE_ERROR
    except KeyboardInterrupt:
        return INTERRUPTED
