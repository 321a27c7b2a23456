"""The Spark source and sink against a SASL_SSL broker: `kafka.security.protocol`, `kafka.ssl.*` and
`kafka.sasl.*` options pass through to every connection of the driver and the executors, as Spark's
Kafka source and sink pass them to their Kafka clients (a real local SparkSession; certificates and
credentials made at test time). With a wrong password the read fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import topic_name
from tests.security.sasl_brokers import ADMIN, ADMIN_PASSWORD, ALICE, ALICE_PASSWORD
from tests.security.secured_broker import Broker, sasl_ssl_broker


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with sasl_ssl_broker(tmp_path_factory.mktemp("spark-secured")) as broker:
        yield broker


def _read(spark, broker: Broker, topic: str, options: dict[str, str]):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in {"subscribe": topic, **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_write_and_read_over_sasl_ssl(spark, secured: Broker) -> None:
    topic = topic_name("spark-sasl-ssl")
    options = secured.spark_options("PLAIN", ALICE, ALICE_PASSWORD)
    rows = [(f"k{i}", f"v{i}") for i in range(20)]
    writer = spark.createDataFrame(rows, "key string, value string").coalesce(2).write.format("odradek")
    writer = writer.mode("append").option("kafka.bootstrap.servers", secured.bootstrap).option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()
    read = _read(spark, secured, topic, options).selectExpr("CAST(value AS STRING) AS value").collect()
    assert sorted(row.value for row in read) == sorted(value for _, value in rows)
    assert f"authenticated with PLAIN as User:{ALICE}" in secured.process.output_path.read_text()


def test_a_read_with_a_wrong_password_fails(spark, secured: Broker) -> None:
    topic = topic_name("spark-sasl-refused")
    admin = secured.spark_options("PLAIN", ADMIN, ADMIN_PASSWORD)
    spark.createDataFrame([("x",)], "value string").write.format("odradek").mode("append").option(
        "kafka.bootstrap.servers", secured.bootstrap
    ).option("topic", topic).options(**admin).save()
    wrong = secured.spark_options("PLAIN", ALICE, "wrong")
    with pytest.raises(Exception, match="authentication failed"):
        _read(spark, secured, topic, wrong).collect()


def test_a_setting_the_source_cannot_honour_is_refused_by_name(spark, secured: Broker) -> None:
    options = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"}
    with pytest.raises(Exception, match="sasl.mechanism"):
        _read(spark, secured, "any", options).collect()
