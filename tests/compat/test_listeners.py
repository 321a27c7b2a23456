"""Several listeners on one broker: each is served, and each answers with its own advertised endpoints.

A broker with listeners INTERNAL, EXTERNAL and REPLICATION (all PLAINTEXT through
listener.security.protocol.map) advertising INTERNAL as 127.0.0.1 and EXTERNAL as localhost; the
REPLICATION listener is bound but not advertised, so a client arriving there finds no broker.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, TopicPartition

from odradek.testing.broker import BrokerProcess, free_port
from tests.compat import wire
from tests.compat.helpers import QUIET, create_topic, produce

LEADER_NOT_AVAILABLE = 5


def _start(tmp_path: Path) -> tuple[BrokerProcess, dict[str, int]]:
    ports = {name: free_port() for name in ("INTERNAL", "EXTERNAL", "REPLICATION")}
    process = BrokerProcess(
        tmp_path / "data",
        port=ports["INTERNAL"],
        output_path=tmp_path / "broker.out",
        overrides={
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "advertised.listeners": f"INTERNAL://127.0.0.1:{ports['INTERNAL']},"
            f"EXTERNAL://localhost:{ports['EXTERNAL']}",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT",
        },
    )
    process.start()
    return process, ports


def _advertised(bootstrap: str) -> list[tuple[str, int]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(timeout=10)
    return [(b.host, b.port) for b in metadata.brokers.values()]


def test_each_listener_answers_with_its_own_endpoint(tmp_path: Path) -> None:
    process, ports = _start(tmp_path)
    try:
        internal = f"127.0.0.1:{ports['INTERNAL']}"
        external = f"localhost:{ports['EXTERNAL']}"
        assert _advertised(internal) == [("127.0.0.1", ports["INTERNAL"])]
        assert _advertised(external) == [("localhost", ports["EXTERNAL"])]

        create_topic(external, "across-listeners")
        values = [b"value-%d" % i for i in range(50)]
        assert produce(external, "across-listeners", values) == list(range(50))
        consumer = KafkaConsumer(bootstrap_servers=internal, consumer_timeout_ms=10_000)
        try:
            consumer.assign([TopicPartition("across-listeners", 0)])
            consumer.seek_to_beginning()
            received = []
            for message in consumer:
                received.append(message.value)
                if len(received) == len(values):
                    break
            assert received == values
        finally:
            consumer.close()
    finally:
        process.stop()


def test_a_listener_without_advertised_endpoint_shows_no_broker(tmp_path: Path) -> None:
    process, ports = _start(tmp_path)
    try:
        create_topic(process.bootstrap, "unadvertised")
        with wire.Connection(f"127.0.0.1:{ports['REPLICATION']}") as conn:
            result = conn.metadata(["unadvertised"])
        assert result.brokers == {}
        assert result.topics["unadvertised"].partitions == {0: (LEADER_NOT_AVAILABLE, 0)}
        assert "listening on INTERNAL://" in process.output_tail()
    finally:
        process.stop()
