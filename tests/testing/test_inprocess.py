"""The in-process broker and the pytest plugin: confluent-kafka against a broker in this process, the
context manager outside pytest, and the plugin as pytest loads it in a project of its own."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from odradek.testing import pytest_plugin
from odradek.testing.inprocess import InProcessBroker

# The plugin's fixtures, for this module whether or not the installed entry point loaded the plugin
kafka_broker_overrides = pytest_plugin.kafka_broker_overrides
kafka_broker = pytest_plugin.kafka_broker
kafka_bootstrap = pytest_plugin.kafka_bootstrap

ROOT = Path(__file__).parents[2]
READY_WITHIN_S = 1.0


def _round_trip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        received: list[bytes] = []
        for _ in range(30):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                received.append(message.value())
            if len(received) == len(values):
                break
        return received
    finally:
        consumer.close()


def test_the_fixtures_serve_confluent_kafka_from_a_broker_ready_within_a_second(
    kafka_broker, kafka_bootstrap, unique_topic
):
    assert kafka_broker.start_seconds < READY_WITHIN_S
    assert kafka_bootstrap == kafka_broker.bootstrap
    assert kafka_broker.data_dir.is_dir()
    assert _round_trip(kafka_bootstrap, unique_topic, [b"one", b"two"]) == [b"one", b"two"]


@pytest.mark.parametrize("kafka_broker_overrides", [{"num.partitions": 3}])
def test_the_overrides_fixture_configures_the_broker(kafka_bootstrap, unique_topic):
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(unique_topic, value=b"x")
    assert producer.flush(10) == 0
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(unique_topic, timeout=10)
    assert len(metadata.topics[unique_topic].partitions) == 3


def test_the_context_manager_runs_two_brokers_and_cleans_up_after_them(unique_topic):
    with InProcessBroker() as first, InProcessBroker() as second:
        assert first.bootstrap != second.bootstrap
        assert _round_trip(first.bootstrap, unique_topic, [b"a"]) == [b"a"]
        address, data_dir = second.bootstrap, second.data_dir
    host, port = address.rsplit(":", 1)
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()
    assert not data_dir.exists()


def test_a_broker_that_cannot_start_raises_its_error(tmp_path):
    with InProcessBroker(tmp_path / "a"), pytest.raises(Exception, match="lock|in use|another"):
        InProcessBroker(tmp_path / "a").start()


def test_the_plugin_is_the_pytest11_entry_point_and_serves_a_project_of_its_own(tmp_path):
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert entry_points["pytest11"] == {"odradek": pytest_plugin.__name__}
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            from confluent_kafka import Producer

            def test_produce(kafka_bootstrap):
                producer = Producer({"bootstrap.servers": kafka_bootstrap})
                producer.produce("orders", value=b"1")
                assert producer.flush(10) == 0
            """
        )
    )
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", pytest_plugin.__name__, "-p", "no:cacheprovider"]
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
