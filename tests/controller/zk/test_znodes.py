"""Kafka's ZooKeeper JSON, read and written: golden znodes as Kafka writes them, and round trips."""

from __future__ import annotations

import json
import uuid

import pytest

from odradek.controller.zk import znodes
from odradek.controller.zk.znodes import (
    BrokerRegistration,
    LeaderAndIsrZNode,
    ProducerIdBlock,
    TopicAssignment,
    ZNodeFormatError,
    ZooKeeperConnect,
)


def test_kafka_uuid_string_is_unpadded_urlsafe_base64():
    topic_id = uuid.UUID("f3b3c1a2-0e4d-4c5b-9a7f-0123456789ab")
    text = znodes.uuid_to_kafka(topic_id)
    assert len(text) == 22 and "=" not in text
    assert znodes.uuid_from_kafka(text) == topic_id
    with pytest.raises(ZNodeFormatError):
        znodes.uuid_from_kafka("short")


def test_broker_registration_as_kafka_writes_it():
    broker = BrokerRegistration(
        2,
        (("PLAINTEXT", "host", 9092), ("EXTERNAL", "::1", 9093)),
        {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"},
        rack="r1",
        timestamp_ms=1700000000000,
    )
    value = json.loads(znodes.encode_broker_registration(broker))
    assert value == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://host:9092", "EXTERNAL://[::1]:9093"],
        "jmx_port": -1,
        "port": 9092,
        "host": "host",
        "version": 5,
        "timestamp": "1700000000000",
        "rack": "r1",
    }
    assert znodes.decode_broker_registration(2, znodes.encode_broker_registration(broker)) == broker


def test_broker_registration_without_rack_has_no_rack_key():
    broker = BrokerRegistration(0, (("INTERNAL", "h", 1),), {"INTERNAL": "PLAINTEXT"})
    value = json.loads(znodes.encode_broker_registration(broker))
    assert "rack" not in value and value["host"] == "h" and value["port"] == 1


def test_controller_and_epoch():
    assert json.loads(znodes.encode_controller(3, 5)) == {
        "version": 2,
        "brokerid": 3,
        "timestamp": "5",
        "kraftControllerEpoch": -1,
    }
    assert znodes.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1"}') == 2
    assert znodes.encode_controller_epoch(7) == b"7"
    assert znodes.decode_controller_epoch(b"7") == 7
    with pytest.raises(ZNodeFormatError):
        znodes.decode_controller_epoch(b"seven")


def test_topic_assignment_versions():
    topic_id = uuid.uuid4()
    topic = TopicAssignment({0: (1, 2, 3), 1: (2, 3, 1)}, topic_id)
    value = json.loads(znodes.encode_topic_assignment(topic))
    assert value == {
        "version": 3,
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": znodes.uuid_to_kafka(topic_id),
    }
    assert znodes.decode_topic_assignment(znodes.encode_topic_assignment(topic)) == topic
    old = znodes.decode_topic_assignment(b'{"version":1,"partitions":{"0":[1]}}')
    assert old.partitions == {0: (1,)} and old.topic_id is None


def test_partition_state_as_kafka_writes_it():
    raw = b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2,3]}'
    state = znodes.decode_partition_state(raw)
    assert state == LeaderAndIsrZNode(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=7)
    assert znodes.decode_partition_state(znodes.encode_partition_state(state)) == state
    assert json.loads(znodes.encode_partition_state(state))["leader_recovery_state"] == 0


def test_configs_changes_and_producer_ids():
    data = b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact"}}'
    assert znodes.decode_entity_config(data) == {"retention.ms": "86400000", "cleanup.policy": "compact"}
    assert znodes.decode_entity_config(znodes.encode_entity_config({"a": "1"})) == {"a": "1"}
    assert znodes.decode_config_change(znodes.encode_config_change("topics", "foo")) == ("topics", "foo")
    block = znodes.decode_producer_id_block(
        b'{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}'
    )
    assert block == ProducerIdBlock(1, 1000, 1999)
    assert znodes.decode_producer_id_block(znodes.encode_producer_id_block(block)) == block


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"{",
        b'{"leader":"x","leader_epoch":0,"isr":[],"controller_epoch":0}',
        b'{"leader":1,"leader_epoch":0,"isr":"1","controller_epoch":0}',
    ],
)
def test_malformed_partition_state_is_refused(data):
    with pytest.raises(ZNodeFormatError):
        znodes.decode_partition_state(data)


def test_paths():
    assert znodes.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert znodes.entity_config_path("brokers", znodes.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert znodes.broker_path(5) == "/brokers/ids/5"


@pytest.mark.parametrize(
    ("value", "hosts", "chroot"),
    [
        ("127.0.0.1:2181", "127.0.0.1:2181", ""),
        ("a:1, b:2/kafka", "a:1,b:2", "/kafka"),
        ("a:1/kafka/prod/", "a:1", "/kafka/prod"),
    ],
)
def test_zookeeper_connect(value, hosts, chroot):
    assert ZooKeeperConnect.parse(value) == ZooKeeperConnect(hosts, chroot)


@pytest.mark.parametrize("value", ["", "a", "a:x", "a:1,,b:2", "a:1//x", ":1", "a:70000"])
def test_bad_zookeeper_connect(value):
    with pytest.raises(ValueError):
        ZooKeeperConnect.parse(value)
