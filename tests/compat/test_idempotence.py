"""Idempotent producers against a real broker: real clients, and Kafka's answers over raw frames.

Apache Kafka's behaviour is the oracle: kafka-python 3.x (idempotent by default with acks=all),
librdkafka with enable.idempotence=true and aiokafka with enable_idempotence=True obtain a producer
id and write batches carrying it, and a consumer reads every record exactly once at dense offsets.
A batch re-sent with the same producer id, epoch and sequences is not appended again and is answered
with the original base offset, also after a clean or a hard restart; an older epoch is answered
INVALID_PRODUCER_EPOCH (47) and a sequence gap OUT_OF_ORDER_SEQUENCE_NUMBER (45), with nothing
appended, except a gap this broker made itself by refusing a batch with a retriable error (docs/deviations.md:
deviations).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaProducer

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.fetch import FetchRequest
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.records.batch import iter_batches
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.record import decode_records
from odradek.testing.broker import free_port
from odradek.testing.cluster import eventually
from tests.compat import helpers
from tests.server.raw_client import RawClient

COUNT = 3000


def values(count: int = COUNT) -> list[bytes]:
    return [b"value-%06d" % i for i in range(count)]


def fetch_log(bootstrap: str, topic: str) -> bytes:
    """Every batch of partition 0, raw (Fetch v12 from offset 0 until the log end)."""
    chunks, offset = [], 0
    with RawClient(bootstrap) as client:
        while True:
            fetch_partition = FetchRequest.FetchPartition(
                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
            )
            request = FetchRequest(
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                topics=[FetchRequest.FetchTopic(topic=topic, partitions=[fetch_partition])],
            )
            (partition,) = client.call(ApiKey.FETCH, 12, request).responses[0].partitions
            assert partition.error_code == ErrorCode.NONE
            data = bytes(partition.records or b"")
            batches = list(iter_batches(data))
            if not batches:
                return b"".join(chunks)
            end = batches[-1][0] + batches[-1][1].size_in_bytes
            chunks.append(data[:end])
            offset = batches[-1][1].next_offset


def assert_exactly_once(bootstrap: str, topic: str, expected: list[bytes]) -> set[int]:
    """Every value once, in order, at offsets 0..n-1; returns the producer ids of the batches."""
    data = fetch_log(bootstrap, topic)
    records = decode_records(data)
    assert [r.offset for r in records] == list(range(len(expected)))
    assert [r.value for r in records] == expected
    return {header.producer_id for _, header in iter_batches(data)}


# -- real clients ----------------------------------------------------------------------------------


def test_kafka_python_acks_all_is_idempotent_and_exactly_once(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", linger_ms=2, max_in_flight_requests_per_connection=5
    )
    try:
        futures = [producer.send(unique_topic, value, partition=0) for value in values()]
        producer.flush(helpers.TIMEOUT_S)
        offsets = [future.get(helpers.TIMEOUT_S).offset for future in futures]
    finally:
        producer.close(helpers.TIMEOUT_S)

    assert offsets == list(range(COUNT))
    producer_ids = assert_exactly_once(broker.bootstrap, unique_topic, values())
    assert len(producer_ids) == 1 and min(producer_ids) >= 0  # idempotence was on


def test_confluent_kafka_enable_idempotence_is_exactly_once(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    offsets = helpers.produce(
        broker.bootstrap,
        unique_topic,
        values(),
        **{"enable.idempotence": True, "max.in.flight.requests.per.connection": 5, "linger.ms": 2},
    )

    assert sorted(offsets) == list(range(COUNT))
    data = fetch_log(broker.bootstrap, unique_topic)
    records = decode_records(data)
    assert [r.offset for r in records] == list(range(COUNT))
    assert [r.value for r in records] == values()
    producer_ids = {header.producer_id for _, header in iter_batches(data)}
    assert len(producer_ids) == 1 and min(producer_ids) >= 0


def test_aiokafka_enable_idempotence_is_exactly_once(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)

    async def produce() -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=2)
        await producer.start()
        try:
            futures = [await producer.send(unique_topic, value, partition=0) for value in values()]
            return [(await future).offset for future in futures]
        finally:
            await producer.stop()

    assert asyncio.run(produce()) == list(range(COUNT))
    producer_ids = assert_exactly_once(broker.bootstrap, unique_topic, values())
    assert len(producer_ids) == 1 and min(producer_ids) >= 0


def test_two_confluent_producers_get_distinct_producer_ids(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    for name in (b"a", b"b"):
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, **helpers.QUIET}
        )
        producer.produce(unique_topic, value=name, partition=0)
        assert producer.flush(helpers.TIMEOUT_S) == 0
    producer_ids = assert_exactly_once(broker.bootstrap, unique_topic, [b"a", b"b"])
    assert len(producer_ids) == 2


# -- raw frames ------------------------------------------------------------------------------------


def init_producer_id(client: RawClient) -> int:
    response = client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transaction_timeout_ms=60_000))
    assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, 0)
    return response.producer_id


def send_batch(
    client: RawClient, topic: str, producer_id: int, epoch: int, seq: int, *payloads: bytes
) -> ProduceRequest.PartitionProduceData:
    batch = build_batch(
        [SimpleRecord(p, timestamp=int(time.time() * 1000)) for p in payloads],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    data = ProduceRequest.PartitionProduceData(index=0, records=batch)
    request = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[data])],
    )
    (partition,) = client.call(ApiKey.PRODUCE, 9, request).responses[0].partition_responses
    return partition


def test_raw_duplicate_gets_the_original_offset_and_is_stored_once(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    with RawClient(broker.bootstrap) as client:
        producer_id = init_producer_id(client)
        first = send_batch(client, unique_topic, producer_id, 0, 0, b"a", b"b", b"c")
        second = send_batch(client, unique_topic, producer_id, 0, 3, b"d")
        again = send_batch(client, unique_topic, producer_id, 0, 0, b"a", b"b", b"c")
        again_second = send_batch(client, unique_topic, producer_id, 0, 3, b"d")

    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 3)
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 0)
    assert (again_second.error_code, again_second.base_offset) == (ErrorCode.NONE, 3)
    assert assert_exactly_once(broker.bootstrap, unique_topic, [b"a", b"b", b"c", b"d"]) == {producer_id}


def test_raw_old_epoch_and_sequence_gap_are_refused(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    with RawClient(broker.bootstrap) as client:
        producer_id = init_producer_id(client)
        assert send_batch(client, unique_topic, producer_id, 0, 0, b"a").error_code == ErrorCode.NONE
        bumped = send_batch(client, unique_topic, producer_id, 1, 0, b"b")
        fenced = send_batch(client, unique_topic, producer_id, 0, 1, b"stale")
        gap = send_batch(client, unique_topic, producer_id, 1, 2, b"gap")
        new_epoch_not_at_zero = send_batch(client, unique_topic, producer_id, 2, 5, b"late")
        resumed = send_batch(client, unique_topic, producer_id, 1, 1, b"c")

    assert (bumped.error_code, bumped.base_offset) == (ErrorCode.NONE, 1)
    assert fenced.error_code == ErrorCode.INVALID_PRODUCER_EPOCH == 47
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert new_epoch_not_at_zero.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (fenced.base_offset, gap.base_offset) == (-1, -1)
    assert (resumed.error_code, resumed.base_offset) == (ErrorCode.NONE, 2)
    assert_exactly_once(broker.bootstrap, unique_topic, [b"a", b"b", b"c"])


def _set_min_insync_replicas(bootstrap: str, topic: str, value: int) -> None:
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("min.insync.replicas", str(value), incremental_operation=AlterConfigOpType.SET)
        ],
    )
    client = helpers.admin(bootstrap)  # must outlive the future
    client.incremental_alter_configs([resource])[resource].result(helpers.TIMEOUT_S)


def test_raw_gap_after_a_min_isr_refusal_is_answered_with_the_refusal(broker, unique_topic: str) -> None:
    """A batch refused NOT_ENOUGH_REPLICAS leaves a sequence gap; once the ISR suffices again, the
    batch after it is answered NOT_ENOUGH_REPLICAS (retriable, nothing written), not Kafka's
    OUT_OF_ORDER_SEQUENCE_NUMBER, which makes librdkafka bump its epoch and write unacknowledged
    batches twice (seed 53 of the fault runs). Retried in order, both are written once."""
    helpers.create_topic(broker.bootstrap, unique_topic, config={"min.insync.replicas": "1"})
    with RawClient(broker.bootstrap) as client:
        producer_id, probe_id = init_producer_id(client), init_producer_id(client)
        assert send_batch(client, unique_topic, producer_id, 0, 0, b"a").error_code == ErrorCode.NONE
        _set_min_insync_replicas(broker.bootstrap, unique_topic, 2)  # more than the one replica
        eventually(
            lambda: (
                send_batch(client, unique_topic, producer_id, 0, 1, b"b").error_code
                == ErrorCode.NOT_ENOUGH_REPLICAS
            ),
            10,
            "min.insync.replicas=2 in force",
        )
        _set_min_insync_replicas(broker.bootstrap, unique_topic, 1)
        eventually(
            lambda: send_batch(client, unique_topic, probe_id, 0, 0, b"probe").error_code == ErrorCode.NONE,
            10,
            "min.insync.replicas=1 in force",
        )
        gap = send_batch(client, unique_topic, producer_id, 0, 2, b"c")
        retried = send_batch(client, unique_topic, producer_id, 0, 1, b"b")
        following = send_batch(client, unique_topic, producer_id, 0, 2, b"c")
        unexplained_gap = send_batch(client, unique_topic, producer_id, 0, 9, b"z")

    assert (gap.error_code, gap.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
    assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 2)
    assert (following.error_code, following.base_offset) == (ErrorCode.NONE, 3)
    assert unexplained_gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert_exactly_once(broker.bootstrap, unique_topic, [b"a", b"probe", b"b", b"c"])


@pytest.mark.slow
@pytest.mark.parametrize("hard", [False, True])
def test_duplicates_are_detected_after_a_restart(make_broker, unique_topic: str, hard: bool) -> None:
    broker = make_broker()
    helpers.create_topic(broker.bootstrap, unique_topic)
    with RawClient(broker.bootstrap) as client:
        producer_id = init_producer_id(client)
        for seq in range(4):
            assert send_batch(client, unique_topic, producer_id, 0, seq, b"v%d" % seq).base_offset == seq

    broker.restart(hard=hard)
    helpers.wait_for_leaders(broker.bootstrap, unique_topic, 1)
    with RawClient(broker.bootstrap) as client:
        duplicates = [send_batch(client, unique_topic, producer_id, 0, seq, b"v%d" % seq) for seq in (1, 3)]
        gap = send_batch(client, unique_topic, producer_id, 0, 9, b"gap")
        following = send_batch(client, unique_topic, producer_id, 0, 4, b"v4")
        assert init_producer_id(client) > producer_id

    assert [(d.error_code, d.base_offset) for d in duplicates] == [(ErrorCode.NONE, 1), (ErrorCode.NONE, 3)]
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (following.error_code, following.base_offset) == (ErrorCode.NONE, 4)
    assert_exactly_once(broker.bootstrap, unique_topic, [b"v%d" % i for i in range(5)])


# -- a retry forced by a lost response -------------------------------------------------------------


class ResponseDroppingProxy:
    """A TCP proxy in front of the broker that, once, drops the connection instead of forwarding the
    response to the `drop_after`-th Produce request, after the broker has appended its batch."""

    def __init__(self, port: int, broker_port: int, drop_after: int) -> None:
        self.broker_port = broker_port
        self.produce_requests = 0
        self.drop_after = drop_after
        self.dropped = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", port))
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._sockets: list[socket.socket] = []
        self._threads[0].start()

    def close(self) -> None:
        _shut(self._listener)
        for sock in self._sockets:
            _shut(sock)
        for thread in self._threads:
            thread.join(5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.broker_port))
            self._sockets += [client, upstream]
            doomed: set[int] = set()
            for target, args in (
                (self._requests, (client, upstream, doomed)),
                (self._responses, (upstream, client, doomed)),
            ):
                thread = threading.Thread(target=target, args=args, daemon=True)
                self._threads.append(thread)
                thread.start()

    def _requests(self, source: socket.socket, sink: socket.socket, doomed: set[int]) -> None:
        for frame in _frames(source):
            api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
            if api_key == ApiKey.PRODUCE:
                with self._lock:
                    self.produce_requests += 1
                    if self.produce_requests == self.drop_after:
                        doomed.add(correlation_id)
            if not _send(sink, frame):
                return

    def _responses(self, source: socket.socket, sink: socket.socket, doomed: set[int]) -> None:
        for frame in _frames(source):
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            if correlation_id in doomed:
                self.dropped.set()
                for sock in (sink, source):
                    _shut(sock)
                return
            if not _send(sink, frame):
                return


def _frames(sock: socket.socket) -> Iterator[bytes]:
    """Whole size-prefixed frames from `sock` until it closes."""
    buffer = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except OSError:
            return
        if not chunk:
            return
        buffer += chunk
        while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
            size = 4 + struct.unpack_from(">i", buffer)[0]
            yield buffer[:size]
            buffer = buffer[size:]


def _shut(sock: socket.socket) -> None:
    """Close `sock` so that a thread blocked on it wakes up and the peer sees the end of the stream."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected, or already shut
    sock.close()


def _send(sock: socket.socket, frame: bytes) -> bool:
    try:
        sock.sendall(frame)
    except OSError:
        return False
    return True


@pytest.mark.slow
def test_batches_resent_after_a_lost_response_are_stored_once(make_broker, unique_topic: str) -> None:
    proxy_port = free_port()
    broker = make_broker({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    proxy = ResponseDroppingProxy(proxy_port, broker.port, drop_after=3)
    bootstrap = f"127.0.0.1:{proxy_port}"
    try:
        helpers.create_topic(bootstrap, unique_topic)
        conf = {"enable.idempotence": True, "linger.ms": 1, "batch.num.messages": 50}
        offsets = helpers.produce(bootstrap, unique_topic, values(1000), **conf)
        assert proxy.dropped.is_set()
        assert sorted(offsets) == list(range(1000))
        producer_ids = assert_exactly_once(broker.bootstrap, unique_topic, values(1000))
        assert len(producer_ids) == 1
    finally:
        proxy.close()
