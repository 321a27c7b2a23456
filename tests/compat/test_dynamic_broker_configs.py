"""Dynamic broker configs on a single node through confluent-kafka's AdminClient (and raw requests
for the cluster-wide default, which librdkafka cannot name): Kafka's precedence, sources and
errors, the effect on existing topics, and persistence across a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import ConfigResource, ResourceType

from odradek.testing.broker import BrokerProcess
from tests.compat import helpers
from tests.compat.broker_configs import (
    DELETE,
    alter_on,
    alter_raw,
    describe_broker,
    describe_default,
    describe_topic,
    set_broker,
)
from tests.server.raw_client import RawClient

pytestmark = pytest.mark.slow

DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


@pytest.fixture
def node(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "data",
        broker_id=1,
        overrides={"log.segment.bytes": "5000000"},
        output_path=tmp_path / "broker.out",
    )
    process.start()
    yield process
    process.kill()


def error_of(action) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        action()
    return raised.value.args[0]


def test_levels_sources_and_restart(node: BrokerProcess) -> None:
    admin = helpers.admin(node.bootstrap)
    helpers.create_topic(node.bootstrap, "plain")
    helpers.create_topic(node.bootstrap, "pinned", config={"retention.ms": "1000"})

    assert alter_raw(node.bootstrap, "", **{"log.retention.ms": "120000"}) == (0, None)
    assert describe_default(node.bootstrap) == {"log.retention.ms": ("120000", DYNAMIC_DEFAULT, False)}
    retention = describe_broker(admin, "1")["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == ("120000", DYNAMIC_DEFAULT, False)
    assert (describe_topic(admin, "plain")["retention.ms"].value) == "120000"
    assert describe_topic(admin, "plain")["retention.ms"].source == DYNAMIC_DEFAULT
    assert describe_topic(admin, "pinned")["retention.ms"].value == "1000"  # the topic override wins

    set_broker(admin, "1", **{"log.retention.ms": "60000", "log.segment.bytes": "2000000"})
    entries = describe_broker(admin, "1")
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "60000",
        DYNAMIC_BROKER,
    )
    assert (entries["log.segment.bytes"].value, entries["log.segment.bytes"].source) == (
        "2000000",
        DYNAMIC_BROKER,
    )
    assert describe_topic(admin, "plain")["segment.bytes"].value == "2000000"
    assert entries["num.partitions"].is_read_only and entries["num.partitions"].source == DEFAULT

    node.restart()
    admin = helpers.admin(node.bootstrap)
    assert describe_default(node.bootstrap) == {"log.retention.ms": ("120000", DYNAMIC_DEFAULT, False)}
    assert describe_broker(admin, "1")["log.retention.ms"].value == "60000"
    assert describe_topic(admin, "plain")["retention.ms"].value == "60000"

    assert alter_raw(node.bootstrap, "", DELETE, **{"log.retention.ms": None}) == (0, None)
    resource = ConfigResource(ResourceType.BROKER, "1", set_config={"log.cleanup.policy": "compact"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource], request_timeout=helpers.TIMEOUT_S)
    futures[resource].result(helpers.TIMEOUT_S)
    entries = describe_broker(admin, "1")  # AlterConfigs replaced the whole per-broker set
    assert (entries["log.segment.bytes"].value, entries["log.segment.bytes"].source) == ("5000000", STATIC)
    assert entries["log.retention.ms"].value is None and entries["log.retention.ms"].source == DEFAULT
    assert describe_topic(admin, "plain")["cleanup.policy"].value == "compact"


def test_refused_changes_store_nothing(node: BrokerProcess) -> None:
    admin = helpers.admin(node.bootstrap)
    read_only = error_of(lambda: set_broker(admin, "1", **{"num.partitions": "3"}))
    assert read_only.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: num.partitions" in read_only.str()
    unknown = error_of(lambda: set_broker(admin, "1", **{"no.such.config": "1"}))
    assert unknown.code() == KafkaError.INVALID_CONFIG
    bad = error_of(lambda: set_broker(admin, "1", **{"log.segment.bytes": "1", "log.retention.ms": "1"}))
    assert bad.code() == KafkaError.INVALID_CONFIG and "log.segment.bytes" in bad.str()
    set_broker(admin, "1", validate_only=True, **{"log.retention.ms": "60000"})
    assert alter_raw(node.bootstrap, "", **{"log.retention.ms": "soon"})[0] == KafkaError.INVALID_CONFIG

    entries = describe_broker(admin, "1")
    assert entries["log.retention.ms"].source == DEFAULT
    assert entries["log.segment.bytes"].source == STATIC
    assert describe_default(node.bootstrap) == {}


def test_deprecated_format_versions_are_accepted_and_ignored(node: BrokerProcess) -> None:
    admin = helpers.admin(node.bootstrap)
    set_broker(admin, "1", **{"log.message.format.version": "2.8", "log.retention.ms": "60000"})
    helpers.create_topic(node.bootstrap, "old-format", config={"message.format.version": "2.8"})
    assert "message.format.version" not in describe_topic(admin, "old-format")
    assert describe_broker(admin, "1")["log.retention.ms"].value == "60000"
    assert "deprecated and ignored" in node.output_tail()


def test_a_lower_message_max_bytes_applies_to_existing_topics(node: BrokerProcess) -> None:
    helpers.create_topic(node.bootstrap, "sized")
    assert alter_raw(node.bootstrap, "", **{"message.max.bytes": "1000"}) == (0, None)
    producer = Producer({"bootstrap.servers": node.bootstrap, **helpers.QUIET})
    outcome: list[KafkaError | None] = []
    producer.produce("sized", b"x" * 3000, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(helpers.TIMEOUT_S)
    assert outcome and outcome[0] is not None and outcome[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_another_broker_id_is_refused(node: BrokerProcess) -> None:
    code, message = alter_raw(node.bootstrap, "7", **{"log.retention.ms": "60000"})
    assert code == KafkaError.INVALID_REQUEST and "Unexpected broker id" in (message or "")


def test_max_connections_per_ip_applies_to_new_connections(node: BrokerProcess) -> None:
    with RawClient(node.bootstrap) as first:
        assert alter_on(first, "", **{"max.connections.per.ip": "1"}) == (0, None)
        with RawClient(node.bootstrap) as second:
            assert second.is_closed_by_peer()
        assert alter_on(first, "", DELETE, **{"max.connections.per.ip": None}) == (0, None)
    with RawClient(node.bootstrap) as first, RawClient(node.bootstrap) as second:
        assert not second.is_closed_by_peer(timeout=0.2)
