"""The `odradek` command line: a registry of subcommands.

Every module `odradek.cli.<name>` (except this one) that defines `COMMAND` is a subcommand:
`COMMAND: str` (its name), `HELP: str`, `add_arguments(parser)` and `run(args) -> int` (the exit
status). Adding a module adds a command; nothing here changes. Exit status 2 means a usage or
configuration error, as argparse does.

Callers: the `odradek` console script and `python -m odradek`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Sequence
from types import ModuleType

import odradek
import odradek.cli


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
    parser = argparse.ArgumentParser(prog="odradek", description="Apache Kafka rebuilt in Python.")
    parser.add_argument("--version", action="version", version=f"odradek {odradek.__version__}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        sub = subcommands.add_parser(module.COMMAND, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))
