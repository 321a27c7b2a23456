"""`odradek cluster [--brokers N] [--data-dir DIR] [--zookeeper-connect HOST:PORT] [--base-port PORT]
[--override key=value ...]`: a local cluster in one command, until Ctrl-C / SIGTERM.

Starts Debian's ZooKeeper server (unless --zookeeper-connect names one) and N `odradek serve`
brokers, broker.id 1..N, broker i on PLAINTEXT://127.0.0.1:(base port + i - 1) in rack `rack-<i>`
(broker.rack), so rack-aware assignment spreads a topic's replicas as over N racks, through
`odradek.testing.cluster.LocalCluster`. Once every broker registered and one holds `/controller`,
prints `bootstrap.servers=...`, `zookeeper.connect=...` and `controller=<broker id>` on stdout.
Everything lives in DIR (default ./odradek-cluster): `zookeeper/` (the server's data and output),
`broker-<id>/` (the log dir) and `broker-<id>.out` (the broker's output), so running the command
again brings the same cluster back, topics and records included. The overrides are broker configs
given to every broker; those the command sets per broker (broker.id, listeners, log.dirs, ...) are
refused. Unless overridden, `offsets.topic.replication.factor` is min(3, N) (Kafka's code default,
where its single-node server.properties says 1), so committed group offsets survive a broker.

Ctrl-C, SIGTERM or SIGHUP stops the brokers gracefully, one after the other (SIGTERM: each moves its
leadership away by controlled shutdown, then exits cleanly), then ZooKeeper, saying on stderr what it
waits for, and exits 0; a second Ctrl-C (or SIGTERM, SIGHUP) meanwhile kills the brokers at once
(SIGKILL: nothing acknowledged is lost, a broker without its clean shutdown marker recovers its logs
at its next start, as Kafka's does), then stops ZooKeeper and exits 1.

The processes it starts die with it, even on kill -9 (Linux's parent-death signal,
testing/parent_death.py). While it runs it holds an flock on DIR/cluster.lock, which names its pid:
a second `odradek cluster` on the same DIR says which one runs there, in one line, and exits 1
(a second ZooKeeper on the same data would serve it as well, and the brokers' logs are locked).

A stop while the brokers start (one waiting for a killed run's session to expire, one still
importing) is a graceful stop too: a broker stopped before it started exits 0 (cli/serve.py).

Exit status: 0 after a graceful stop; 1 if a broker did not exit 0 (which, with what status or
signal, and its output's last line, on stderr), the cluster did not come up (the reason on stderr)
or DIR is in use; 2 on a usage error, a bad broker config, or no ZooKeeper server
to start.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import IO

from odradek.cli.main import USAGE_ERROR, UsageError
from odradek.server.config import ConfigError, KafkaConfig, parse_override
from odradek.testing.broker import BrokerProcess, BrokerStartError
from odradek.testing.cluster import LocalCluster
from odradek.testing.zookeeper import ZooKeeperStartError, zookeeper_classpath

COMMAND = "cluster"
HELP = "run a local cluster: a ZooKeeper server and N brokers, until Ctrl-C"

DEFAULT_DATA_DIR = "odradek-cluster"
LOCK_FILE = "cluster.lock"
START_TIMEOUT_S = 60.0
PER_BROKER_KEYS = frozenset(
    {"broker.id", "listeners", "advertised.listeners", "log.dir", "log.dirs", "zookeeper.connect"}
)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Stop(Exception):
    """A stop signal, raised in the main thread as Ctrl-C raises KeyboardInterrupt."""


# Each stop signal is also remembered here: Python drops an exception that a signal handler raises
# while the main thread runs a fork's clean-up callbacks (subprocess.Popen starting ZooKeeper or a
# broker), so a stop that came then is acted on at the next check (`_check_stop`) instead of lost.
_STOP_SEEN = [False]


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
    _STOP_SEEN[0] = False
    for signum in (*_STOP_SIGNALS, signal.SIGINT):
        signal.signal(signum, _raise_stop)
    try:
        lock = _lock(cluster.data_dir)
    except _Stop:
        return 0  # stopped before anything started
    if lock is None:
        return 1
    with lock:
        try:
            status = _run_until_stopped(cluster)
        except _Stop:  # raised as _run_until_stopped was entered, before its own try
            status = 0
        finally:
            stopped = _stop(cluster)
        if not stopped:
            lock.truncate(0)  # every broker closed its session: the next run need not wait
    return status or stopped


def _lock(data_dir: Path) -> IO[str] | None:
    """DIR/cluster.lock, locked and naming this process while the returned file stays open; None
    (said on stderr) when another `odradek cluster` holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held open for the whole run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        _say(
            f"{data_dir} is in use by odradek cluster pid {holder}: stop it first, or give another --data-dir"
        )
        return None
    lock.seek(0)
    if previous := lock.read().strip():
        _say(
            f"the last odradek cluster here (pid {previous}) did not stop gracefully: a broker whose "
            "ZooKeeper session it left open waits for that session to expire before it registers "
            "(zookeeper.session.timeout.ms and a few seconds)"
        )
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


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
        die_with_owner=True,
    )


def _run_until_stopped(cluster: LocalCluster) -> int:
    """Start the cluster, announce it and wait for a stop signal: 0, or 1 if it did not come up."""
    try:
        _start(cluster)
        while not _STOP_SEEN[0]:
            signal.pause()
        return 0
    except _Stop:
        return 0
    except (BrokerStartError, ZooKeeperStartError, AssertionError) as exc:
        _say(f"the cluster did not come up: {exc}")
        return 1


def _start(cluster: LocalCluster) -> None:
    _say(f"starting a cluster of {cluster.broker_count} brokers in {cluster.data_dir}")
    cluster.start(START_TIMEOUT_S)
    _check_stop()
    controller = cluster.wait_for_controller(START_TIMEOUT_S)
    print(f"bootstrap.servers={cluster.bootstrap}")
    print(f"zookeeper.connect={cluster.connect}")
    print(f"controller={controller}", flush=True)
    _say(
        f"{cluster.broker_count} brokers up (output in {cluster.data_dir}/broker-<id>.out); Ctrl-C stops them"
    )


def _stop(cluster: LocalCluster) -> int:
    """Stop the brokers gracefully, then ZooKeeper, saying what it waits for; a second stop signal
    meanwhile kills the brokers at once. 0, or 1 if a broker did not exit 0."""
    hurried = False

    def hurry(signum: int, frame: FrameType | None) -> None:
        nonlocal hurried
        if not hurried:
            _say_from_handler(
                "stopping at once: the brokers are killed (they recover their logs at their next start)"
            )
        hurried = True
        for process in cluster.brokers.values():
            if process.is_running():
                process.send_signal(signal.SIGKILL)

    def announce(line: str) -> None:
        if not hurried:
            _say(line)

    for signum in (*_STOP_SIGNALS, signal.SIGINT):
        signal.signal(signum, hurry)
    _say("stopping the brokers one after the other, then ZooKeeper; Ctrl-C again stops them at once")
    codes = cluster.stop(announce=announce)
    for signum in (*_STOP_SIGNALS, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    if hurried:
        return 1
    failed = {broker_id: code for broker_id, code in codes.items() if code}
    for broker_id, code in failed.items():
        _say(_failure(cluster.brokers[broker_id], code))
    return 1 if failed else 0


def _failure(process: BrokerProcess, code: int) -> str:
    """What became of a broker that did not exit 0: its exit status or the signal that killed it,
    where its output is, and the output's last line."""
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
    last = process.last_output_line() or "(none)"
    return f"broker {process.broker_id} {how} (its output: {process.output_path}); its last line: {last}"


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    _STOP_SEEN[0] = True
    raise _Stop


def _check_stop() -> None:
    """Raise the stop a signal asked for, if its own raise was dropped."""
    if _STOP_SEEN[0]:
        raise _Stop


def _say(line: str) -> None:
    print(f"odradek cluster: {line}", file=sys.stderr, flush=True)


def _say_from_handler(line: str) -> None:
    """`_say` from a signal handler, which may run while the main code is inside a print."""
    os.write(sys.stderr.fileno(), f"odradek cluster: {line}\n".encode())


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
