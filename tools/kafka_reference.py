"""Apache Kafka as a fetched reference (issue 34): the command line over odradek/testing/kafka_reference.py.

    python tools/kafka_reference.py fetch [VERSION ...]   the jars into the cache (default: both pinned)
    python tools/kafka_reference.py classpath VERSION      the JVM classpath of a fetched version
    python tools/kafka_reference.py broker VERSION [--brokers 3] [--zookeeper HOST:PORT]
                                                           a broker (or a cluster) until SIGINT/SIGTERM

The cache is $ODRADEK_KAFKA_CACHE or ~/.cache/odradek/kafka; the pom is tools/kafka-reference/pom.xml.
A 3.9 broker needs a ZooKeeper: without --zookeeper one is started (Debian's zookeeper package).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from odradek.testing import kafka_reference
from odradek.testing.zookeeper import ZooKeeperServer


def fetch(versions: list[str]) -> None:
    for version in versions or kafka_reference.VERSIONS:
        if kafka_reference.is_fetched(version):
            print(f"Kafka {version}: already in {kafka_reference.libs_dir(version)}")
            continue
        print(f"Kafka {version}: fetching with Maven into {kafka_reference.libs_dir(version)}", flush=True)
        kafka_reference.fetch(version)


def broker(version: str, size: int, zookeeper: str | None) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):  # background shells start us with SIGINT ignored
        signal.signal(signum, lambda *_: sys.exit(0))
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"kafka-{version}-")))
        if not kafka_reference.is_kraft(version) and zookeeper is None:
            zookeeper = stack.enter_context(ZooKeeperServer(work / "zookeeper")).connect_string
        cluster = kafka_reference.KafkaCluster(work, version, size, zookeeper_connect=zookeeper)
        stack.enter_context(cluster)
        print(f"Kafka {version} listening on {cluster.bootstrap}; SIGINT or SIGTERM stops it", flush=True)
        signal.pause()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch").add_argument("versions", nargs="*")
    commands.add_parser("classpath").add_argument("version")
    run = commands.add_parser("broker")
    run.add_argument("version")
    run.add_argument("--brokers", type=int, default=1)
    run.add_argument("--zookeeper", help="zookeeper.connect for a 3.9 cluster (default: start one)")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        fetch(args.versions)
    elif args.command == "classpath":
        print(kafka_reference.classpath(args.version))
    else:
        broker(args.version, args.brokers, args.zookeeper)


if __name__ == "__main__":
    main()
