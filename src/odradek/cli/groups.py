"""`odradek groups`: the older, subcommand-style spelling of `odradek consumer-groups`.

    odradek groups list --bootstrap-server HOST:PORT [--state]
    odradek groups describe --bootstrap-server HOST:PORT GROUP
    odradek groups delete --bootstrap-server HOST:PORT GROUP
    odradek groups reset-offsets --bootstrap-server HOST:PORT --group G --topic T[:P,P...]
        (--to-earliest | --to-latest | --to-offset N) [--dry-run | --execute]

The connection options (--bootstrap-server, --timeout, --connect-timeout, in seconds) go before or
after the action, as the user likes (`odradek groups --bootstrap-server X list` works too). Each
action is translated into the consumer-groups action with the same meaning, which does the work and
prints Kafka's output (odradek.cli.consumer_groups). Exit status: 0 on success, 1 on a failure
reported by the cluster or a cluster that cannot be reached, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys

from odradek.cli import consumer_groups
from odradek.cli.common import guarded
from odradek.cli.main import UsageError, seconds_option
from odradek.client import KafkaClient, bootstrap_option
from odradek.client.group_admin import GroupAdmin

COMMAND = "groups"
HELP = "list, describe and delete consumer groups, reset their offsets (consumer-groups, older spelling)"

CLIENT_ID = "odradek-groups"


def _connection_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every action takes; given at the action level they win over the group level.

    At the action level they default to SUPPRESS, so an option given before the action is kept."""

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_option,
        default=default(None),
        metavar="HOST:PORT[,HOST:PORT...]",
        help="brokers to start from (required)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds_option,
        default=default(30.0),
        metavar="SECONDS",
        help="give up on a request after this long (default 30)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=seconds_option,
        default=default(5.0),
        metavar="SECONDS",
        help="keep trying to reach a bootstrap server this long (default 5)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _connection_options(parser, defaults=True)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the groups")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    actions.add_parser("describe", help="offsets, lag and members of a group").add_argument("group")
    actions.add_parser("delete", help="delete a group that has no members").add_argument("group")
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True, type=consumer_groups.topic_spec, metavar="TOPIC[:P,P...]")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    for action in actions.choices.values():
        _connection_options(action, defaults=False)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap_server is None:
        raise UsageError("the following arguments are required: --bootstrap-server")
    translated = consumer_groups.default_options()
    vars(translated).update(_translated(args))

    def body() -> int:
        with KafkaClient.connect(
            args.bootstrap_server,
            retry_for_s=args.connect_timeout,
            on_retry=_announce_retry,
            client_id=CLIENT_ID,
            timeout_s=args.timeout,
        ) as client:
            return consumer_groups.ACTIONS[translated.action](GroupAdmin(client, args.timeout), translated)

    return guarded(COMMAND, body)


def _translated(args: argparse.Namespace) -> dict[str, object]:
    """The consumer-groups options that mean what this action's options mean."""
    if args.action == "list":
        return {"action": "list", "state": "" if args.state else None}
    if args.action in ("describe", "delete"):
        return {"action": args.action, "group": [args.group]}
    return {
        "action": "reset_offsets",
        "group": [args.group],
        "topic": [args.topic],
        "to_earliest": args.to_earliest,
        "to_latest": args.to_latest,
        "to_offset": args.to_offset,
        "dry_run": args.dry_run,
        "execute": args.execute,
    }


def _announce_retry(line: str) -> None:
    print(f"odradek groups: {line}", file=sys.stderr, flush=True)
