"""Fixtures of the Spark tests: one local SparkSession and one broker process for the whole session.

- `spark`: a real local SparkSession on master `local[2,4]` (2 task threads, a task may fail up to 4
  times, so injected task failures are retried), shared by every test to keep JVM start-ups and
  Spark jobs few. The `odradek` data source is registered on it.
- `bootstrap`: a real `odradek serve` (BrokerProcess) on a free port, checking retention every
  200 ms so tests can make records disappear through topic configs; setting
  ODRADEK_SPARK_BOOTSTRAP=host:port points the tests at an already running broker instead.
- `client`: a blocking odradek client on that broker; `make_topic(partitions)` creates a fresh topic.

Tests under tests/spark that use `spark` carry the `spark` marker (tests that start their own Spark
driver process mark themselves).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.client import KafkaClient
from odradek.testing.broker import BrokerProcess
from tests.conftest import topic_name

_SPARK_DIR = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _SPARK_DIR in Path(item.fspath).parents and "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("ODRADEK_SPARK_BOOTSTRAP")
    if external:
        yield external
        return
    root = tmp_path_factory.mktemp("spark-broker")
    broker = BrokerProcess(
        root / "data", output_path=root / "broker.out", overrides={"log.retention.check.interval.ms": 200}
    )
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from pyspark.sql import SparkSession

    import odradek.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    scratch = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("odradek-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def client(bootstrap: str) -> Iterator[KafkaClient]:
    with KafkaClient(bootstrap) as kafka:
        yield kafka


@pytest.fixture
def make_topic(client: KafkaClient, request: pytest.FixtureRequest) -> Callable[..., str]:
    def factory(partitions: int = 1, hint: str | None = None, configs: dict[str, str] | None = None) -> str:
        name = topic_name(hint or request.node.name)
        client.create_topics({name: partitions}, configs=configs)
        return name

    return factory
