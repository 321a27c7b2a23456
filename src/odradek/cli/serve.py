"""`odradek serve [--config FILE] [--override key=value ...]`: run a broker until SIGTERM / SIGINT.

With no arguments: broker 0 on PLAINTEXT://127.0.0.1:9092 storing its logs in the user's state dir.
A bad configuration is printed (naming the key) and exits 2, as does one that asks for a protection
odradek does not provide (ACLs, TLS, SASL); a failure to start (a log dir owned by another broker,
the port in use, a broker id a live broker holds in ZooKeeper, once the wait for a dead session's
registration to expire has passed: server/kafka_server.py) exits 1; a graceful shutdown exits 0.
Before the broker starts, the soft open-file limit is raised to the hard limit (server/limits.py),
both logged.

SIGTERM and SIGINT stop the broker from the first moment of `run`, before the broker installs its
own handlers (server/kafka_server.py `run_broker`, after a second of imports and more on a loaded
machine): a stop that comes before the broker started is a clean stop, logged, exit 0, not a death
by the signal's default action. An owner that may stop its broker at once (testing/broker.py) spawns
it with both signals blocked, which the child inherits across exec; `run` unblocks them once its
handler is in place, so a stop sent during the interpreter's own start waits for it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from types import FrameType

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

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # as run_broker's; testing/stop_signals.py holds the same

log = logging.getLogger(__name__)


class StoppedBeforeStart(BaseException):
    """A stop signal before the broker's own handlers took over; a BaseException, as KeyboardInterrupt
    is, so that no `except Exception` on its way swallows it."""


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
    try:
        _stop_from_now()  # a stop held back since the spawn is raised here
        return _serve(args)
    except StoppedBeforeStart as stop:
        log.info("odradek broker stopped by %s before it started", stop)
        return 0


def _stop_from_now() -> None:
    """Handle SIGTERM and SIGINT from here on, and let in any that an owner held back while the
    process started."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop_before_start)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _stop_before_start(signum: int, frame: FrameType | None) -> None:
    raise StoppedBeforeStart(signal.Signals(signum).name)


def _serve(args: argparse.Namespace) -> int:
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
