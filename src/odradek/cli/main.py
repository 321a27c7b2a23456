"""The `odradek` command line: a registry of subcommands.

Every module `odradek.cli.<name>` (except this one) that defines `COMMAND` is a subcommand:
`COMMAND: str` (its name), `HELP: str`, `add_arguments(parser)` and `run(args) -> int` (the exit
status). Adding a module adds a command; nothing here changes. Exit status 2 means a usage or
configuration error, as argparse does.

Usage errors are one line on stderr, `odradek groups list: argument --bootstrap-server: ...
(see 'odradek groups list --help')`, whether argparse finds them or a command's `run` raises
`UsageError` for a check argparse cannot express. Ctrl-C ends a command with status 130 and no
traceback.

Callers: the `odradek` console script and `python -m odradek`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

import odradek
import odradek.cli

USAGE_ERROR = 2
INTERRUPTED = 130


class UsageError(Exception):
    """Raised by a command's `run` for a usage error argparse could not catch; exits 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as one line pointing at --help (odradek.pipeline uses it too)."""

    def error(self, message: str) -> NoReturn:
        _usage_error(self.prog, message)
        self.exit(USAGE_ERROR)


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
