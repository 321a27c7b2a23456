"""Run kafka-python's own integration tests against odradek brokers.

kafka-python's `test/integration` fixtures start an Apache Kafka from `servers/<KAFKA_VERSION>/`,
unless `KAFKA_URI` names a running broker: then every test talks to it (as broker 0; its topics are
created with kafka-python's admin client). This starts odradek (one single-node broker with id 0 and
two log dirs, so that log dir moves have somewhere to go, or with `--cluster` three ZooKeeper-mode
brokers on a ZooKeeper of their own), with the settings of kafka-python's own broker template that
odradek knows (`FIXTURE_CONFIGS`, and a static advertised.listeners: its tests expect them), points
the suite at it with `KAFKA_VERSION` (default 4.0.0: the version whose features the tests expect)
and `KAFKA_URI`, runs pytest in the kafka-python checkout, stops the brokers, and exits with
pytest's code.

    python tools/kafka_python_integration.py CHECKOUT [--cluster] [--kafka-version V] [-- PYTEST_ARGS]

CHECKOUT is a kafka-python source tree (at least its `test/` directory and `pyproject.toml`, whose
pytest settings apply); kafka-python itself is imported from CHECKOUT when it holds the package,
else from the installed one (CHECKOUT comes first on PYTHONPATH). PYTEST_ARGS default to the
DescribeTopicPartitions and log dir tests of `test/integration/test_admin_integration.py`. Run it
from the repository root with odradek importable (installed, or PYTHONPATH=src).

Environment the suite is given besides: `KAFKA_ROOT`, an empty directory (the fixtures insist that
it exists, and use nothing in it for an external broker). pytest runs without odradek's own plugin
(its `kafka_broker` fixture has the name kafka-python's conftest defines), without hypothesis's
(kafka-python's tests do not use it; one run here failed while loading it, with a SystemError from
pytest's assertion rewriter) and without the cache provider (nothing is written into CHECKOUT).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import LocalCluster

DEFAULT_PYTEST_ARGS = [
    "test/integration/test_admin_integration.py",
    "-k",
    "describe_topic_partitions or log_dirs",
    "-v",
]
PLUGINS_OFF = ["-p", "no:odradek", "-p", "no:hypothesispytest", "-p", "no:cacheprovider"]
# kafka-python's servers/resources/default/kafka.properties as its fixtures fill it in by default
# (4 partitions, 1 replica), less what is KRaft's or what odradek does not have.
FIXTURE_CONFIGS = {
    "num.partitions": 4,
    "default.replication.factor": 1,
    "replica.lag.time.max.ms": 1000,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 2,
    "offsets.commit.timeout.ms": 500,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "log.cleaner.enable": "false",
    "group.min.session.timeout.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
}


@contextmanager
def running_brokers(root: Path, cluster: bool) -> Iterator[str]:
    """The bootstrap `host:port` of the first broker, for as long as the brokers run."""
    if cluster:
        with LocalCluster(root / "cluster", 3) as brokers:
            brokers.wait_for_controller()
            yield brokers.brokers[1].bootstrap
    else:
        dirs = [root / "log-dir-a", root / "log-dir-b"]
        broker = BrokerProcess(dirs[0], output_path=root / "broker.out", broker_id=0)
        broker.overrides = {
            **FIXTURE_CONFIGS,
            "log.dirs": ",".join(str(d) for d in dirs),
            "advertised.listeners": f"PLAINTEXT://{broker.bootstrap}",
        }
        with broker:
            yield broker.bootstrap


def run(checkout: Path, cluster: bool, kafka_version: str, pytest_args: Sequence[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="kafka-python-integration-") as tmp:
        root = Path(tmp)
        kafka_root = root / "kafka-root"
        kafka_root.mkdir()
        with running_brokers(root, cluster) as bootstrap:
            env = {
                **os.environ,
                "KAFKA_VERSION": kafka_version,
                "KAFKA_URI": f"PLAINTEXT://{bootstrap}",
                "KAFKA_ROOT": str(kafka_root),
                "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")]),
            }
            command = [sys.executable, "-m", "pytest", *PLUGINS_OFF, *(pytest_args or DEFAULT_PYTEST_ARGS)]
            print(f"kafka-python's tests against odradek at {bootstrap}: {' '.join(command)}", flush=True)
            return subprocess.run(command, cwd=checkout, env=env, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, pytest_args = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a kafka-python source tree (with test/)")
    parser.add_argument("--cluster", action="store_true", help="three ZooKeeper-mode brokers, not one")
    parser.add_argument("--kafka-version", default="4.0.0", help="KAFKA_VERSION the suite is told")
    args = parser.parse_args(ours)
    if not (args.checkout / "test" / "integration").is_dir():
        parser.error(f"{args.checkout} has no test/integration directory")
    return run(args.checkout.resolve(), args.cluster, args.kafka_version, pytest_args)


if __name__ == "__main__":
    sys.exit(main())
