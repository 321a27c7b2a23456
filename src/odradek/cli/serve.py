"""`odradek serve [--config FILE] [--override key=value ...]`: run a broker until SIGTERM / SIGINT.

With no arguments: broker 0 on PLAINTEXT://127.0.0.1:9092 storing its logs in the user's state dir.
A bad configuration is printed (naming the key) and exits 2, as does one that asks for a protection
odradek does not provide (ACLs, TLS, SASL); a failure to start (a log dir owned by another broker,
the port in use, a broker id a live broker holds in ZooKeeper, once the wait for a dead session's
registration to expire has passed: server/kafka_server.py) exits 1; a graceful shutdown exits 0.
Before the broker starts, the soft open-file limit is raised to the hard limit (server/limits.py),
both logged.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from odradek.controller.meta_properties import MetaPropertiesError
from odradek.controller.zk.errors import BrokerIdInUseError
from odradek.log_setup import configure_logging
from odradek.protocol.records import record_loops
from odradek.server.config import ConfigError, KafkaConfig
from odradek.server.kafka_server import run_broker
from odradek.server.limits import raise_open_file_limit
from odradek.storage.errors import StorageError

COMMAND = "serve"
HELP = "run a broker"

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="a server.properties file")
    parser.add_argument(
        "--override",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set a config on top of the file (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    if record_loops.__file__ is None or record_loops.__file__.endswith(".py"):
        log.warning("The per-record loops run uncompiled, 10-25x slower: run python tools/build_native.py")
    try:
        config = KafkaConfig.from_sources(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 2
    raise_open_file_limit()
    try:
        asyncio.run(run_broker(config))
    except (MetaPropertiesError, StorageError, ConfigError, OSError, BrokerIdInUseError) as exc:
        log.error("odradek broker %d failed to start: %s", config.broker_id, exc)
        return 1
    return 0
