"""`odradek cluster [--brokers N] [--data-dir DIR] [--zookeeper-connect HOST:PORT] [--base-port PORT]
[--override key=value ...]`: a local cluster in one command, until Ctrl-C / SIGTERM.

Starts Debian's ZooKeeper server (unless --zookeeper-connect names one) and N `odradek serve`
brokers, broker.id 1..N, broker i on PLAINTEXT://127.0.0.1:(base port + i - 1), through
`odradek.testing.cluster.LocalCluster`. Once every broker registered and one holds `/controller`,
prints `bootstrap.servers=...`, `zookeeper.connect=...` and `controller=<broker id>` on stdout.
Everything lives in DIR (default ./odradek-cluster): `zookeeper/` (the server's data and output),
`broker-<id>/` (the log dir) and `broker-<id>.out` (the broker's output), so running the command
again brings the same cluster back, topics and records included. The overrides are broker configs
given to every broker; those the command sets per broker (broker.id, listeners, log.dirs, ...) are
refused. Unless overridden, `offsets.topic.replication.factor` is min(3, N) (Kafka's code default,
where its single-node server.properties says 1), so committed group offsets survive a broker.

Ctrl-C, SIGTERM or SIGHUP stops the brokers gracefully (SIGTERM each), then ZooKeeper, and exits 0;
1 if a broker did not exit 0 or the cluster did not come up (the reason on stderr); 2 on a usage
error, a bad broker config, or no ZooKeeper server to start.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from odradek.cli.main import USAGE_ERROR, UsageError
from odradek.server.config import ConfigError, KafkaConfig, parse_override
from odradek.testing.broker import BrokerStartError
from odradek.testing.cluster import LocalCluster
from odradek.testing.zookeeper import ZooKeeperStartError, zookeeper_classpath

COMMAND = "cluster"
HELP = "run a local cluster: a ZooKeeper server and N brokers, until Ctrl-C"

DEFAULT_DATA_DIR = "odradek-cluster"
START_TIMEOUT_S = 60.0
PER_BROKER_KEYS = frozenset(
    {"broker.id", "listeners", "advertised.listeners", "log.dir", "log.dirs", "zookeeper.connect"}
)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Stop(Exception):
    """A stop signal, raised in the main thread as Ctrl-C raises KeyboardInterrupt."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=_positive_int, default=3, metavar="N", help="(default 3)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(DEFAULT_DATA_DIR),
        metavar="DIR",
        help=f"the cluster's logs and ZooKeeper data, kept across runs (default ./{DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--zookeeper-connect",
        metavar="HOST:PORT[/CHROOT]",
        help="use this ZooKeeper instead of starting one",
    )
    parser.add_argument(
        "--base-port",
        type=_port,
        default=9092,
        metavar="PORT",
        help="broker i listens on 127.0.0.1:PORT+i-1 (default 9092)",
    )
    parser.add_argument(
        "--override",
        type=_override,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    if args.zookeeper_connect is None and zookeeper_classpath() is None:
        _say("no ZooKeeper server to start: apt-get install zookeeper (or name one with --zookeeper-connect)")
        return USAGE_ERROR
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _raise_stop)
    try:
        status = _run_until_stopped(cluster)
    finally:
        for signum in (*_STOP_SIGNALS, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
        stopped = _stop(cluster)
    return status or stopped


def _cluster(args: argparse.Namespace) -> LocalCluster:
    """The cluster the arguments describe (not started); UsageError for what argparse cannot check."""
    last_port = args.base_port + args.brokers - 1
    if last_port > 65535:
        raise UsageError(f"{args.brokers} brokers from port {args.base_port} go past port 65535")
    overrides = {"offsets.topic.replication.factor": str(min(3, args.brokers)), **dict(args.override)}
    try:
        config = KafkaConfig(overrides)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return LocalCluster(
        args.data_dir.absolute(),
        args.brokers,
        zookeeper_connect=args.zookeeper_connect,
        chroot="",
        session_timeout_ms=config["zookeeper.session.timeout.ms"],
        overrides=overrides,
        base_port=args.base_port,
    )


def _run_until_stopped(cluster: LocalCluster) -> int:
    """Start the cluster, announce it and wait for a stop signal: 0, or 1 if it did not come up."""
    try:
        _start(cluster)
        while True:
            signal.pause()
    except (_Stop, KeyboardInterrupt):
        return 0
    except (BrokerStartError, ZooKeeperStartError, AssertionError) as exc:
        _say(f"the cluster did not come up: {exc}")
        return 1


def _start(cluster: LocalCluster) -> None:
    _say(f"starting a cluster of {cluster.broker_count} brokers in {cluster.data_dir}")
    cluster.start(START_TIMEOUT_S)
    controller = cluster.wait_for_controller(START_TIMEOUT_S)
    print(f"bootstrap.servers={cluster.bootstrap}")
    print(f"zookeeper.connect={cluster.connect}")
    print(f"controller={controller}", flush=True)
    _say(
        f"{cluster.broker_count} brokers up (output in {cluster.data_dir}/broker-<id>.out); Ctrl-C stops them"
    )


def _stop(cluster: LocalCluster) -> int:
    """Stop the brokers gracefully, then ZooKeeper: 0, or 1 if a broker did not exit 0."""
    codes = cluster.stop()
    failed = {broker_id: code for broker_id, code in codes.items() if code}
    for broker_id, code in failed.items():
        output = cluster.brokers[broker_id].output_path
        _say(f"broker {broker_id} exited with {code} (its output: {output})")
    return 1 if failed else 0


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def _say(line: str) -> None:
    print(f"odradek cluster: {line}", file=sys.stderr, flush=True)


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return int(value)


def _port(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got {value!r}")
    return int(value)


def _override(value: str) -> tuple[str, str]:
    """argparse `type=` of --override: `key=value`, a key the command does not set per broker."""
    try:
        key, setting = parse_override(value)
    except ConfigError:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}") from None
    if key in PER_BROKER_KEYS:
        raise argparse.ArgumentTypeError(f"{key} is set per broker by odradek cluster")
    return key, setting
