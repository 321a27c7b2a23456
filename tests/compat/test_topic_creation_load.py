"""Topic creation never blocks the broker: a real broker process, raw frames, and confluent-kafka.

The incident this guards against: one 58-byte CreateTopics v7 asking for 100,000 partitions made a
broker create every log on its event loop (ApiVersions unanswered, thousands of open files, SIGTERM
ignored, no port after a restart). Here the same bytes are refused up front (max.broker.partitions),
a large accepted creation (3,000 partitions) runs in the background while another connection's
ApiVersions stays answered within 100 ms (the worst of many probes is asserted), SIGTERM in the
middle of it stops the broker within 10 s, a restart serves ApiVersions and Metadata within a few
seconds while the partitions load, and in the end every partition takes a produce.
"""

from __future__ import annotations

import signal
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.wire import Connection, connect, record_batch, recv_response

INCIDENT_FRAME = bytes.fromhex(
    "00000036001300070000000000136b61666b612d707974686f6e2d332e302e3132000208746d7064656c32"
    "000186a00001010100000075300000"
)
UNKNOWN_TOPIC_OR_PARTITION = 3
POLICY_VIOLATION = 44
NOT_LEADER_OR_FOLLOWER = 6
LARGE = 3000
PROBE_BOUND_S = 0.100
RESTART_BOUND_S = 5.0
SIGTERM_BOUND_S = 10.0


def create_topics_v7(name: str, partitions: int, timeout_ms: int, correlation_id: int = 1) -> bytes:
    """A CreateTopics v7 frame (flexible: compact strings and arrays, empty tagged fields)."""
    raw = name.encode()
    client = b"kafka-python-3.0.12"
    header = struct.pack(">hhih", 19, 7, correlation_id, len(client)) + client + b"\x00"
    topic = bytes([len(raw) + 1]) + raw + struct.pack(">ih", partitions, 1) + b"\x01\x01\x00"
    body = b"\x02" + topic + struct.pack(">i?", timeout_ms, False) + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def create_topics_error(sock_frame: bytes, bootstrap: str) -> int:
    """Send one CreateTopics frame and return its first topic's error code."""
    with connect(bootstrap, timeout=60) as sock:
        sock.sendall(sock_frame)
        _, body = recv_response(sock)
    position = 1 + 4 + 1  # response header tags, throttle_time_ms, topics array length
    name_length = body[position] - 1
    position += 1 + name_length + 16  # name, topic id
    (error_code,) = struct.unpack_from(">h", body, position)
    return error_code


@contextmanager
def api_versions_probes(bootstrap: str) -> Iterator[list[float]]:
    """ApiVersions on its own connection every 10 ms while the block runs; yields the latencies."""
    latencies: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with Connection(bootstrap, timeout=30) as conn:
            while not stop.is_set():
                started = time.monotonic()
                assert conn.api_versions().error_code == 0
                latencies.append(time.monotonic() - started)
                stop.wait(0.01)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        yield latencies
    finally:
        stop.set()
        thread.join(30)


def wait_for(condition, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    with Connection(bootstrap, timeout=30) as conn:
        found = conn.metadata([topic]).topics.get(topic)
    return found.partitions if found is not None else {}


def test_the_incident_request_is_refused_and_a_large_creation_never_blocks_the_broker(make_broker):
    broker = make_broker()
    # Only small requests run beside the probes: a Metadata of all 3,000 partitions is itself tens of
    # milliseconds of encoding on the loop, which is the cost of its answer, not of the creation.
    with api_versions_probes(broker.bootstrap) as latencies:
        assert create_topics_error(INCIDENT_FRAME, broker.bootstrap) == POLICY_VIOLATION
        assert create_topics_error(create_topics_v7("large", LARGE, 0), broker.bootstrap) == 0
        with Connection(broker.bootstrap) as conn:
            assert conn.metadata(["tmpdel2"]).topics["tmpdel2"].error_code == UNKNOWN_TOPIC_OR_PARTITION
            batch = record_batch([(None, b"first")])
            last_takes_produce = lambda: conn.produce("large", LARGE - 1, batch, acks=1).error_code == 0  # noqa: E731
            assert wait_for(last_takes_produce, 120, 0.05)
        time.sleep(0.5)  # probes keep running past the creation's end
    assert len(leaders(broker.bootstrap, "large")) == LARGE
    assert len(latencies) >= 50, f"only {len(latencies)} probes"
    worst = max(latencies)
    assert worst < PROBE_BOUND_S, (
        f"worst ApiVersions latency {worst * 1000:.1f} ms over {len(latencies)} probes"
    )


def test_sigterm_mid_creation_then_a_restart_serves_at_once_and_every_partition_takes_produce(make_broker):
    broker = make_broker()
    assert create_topics_error(create_topics_v7("big", LARGE, 0), broker.bootstrap) == 0
    assert wait_for(lambda: broker.data_dir.joinpath("big-20").is_dir(), 30)  # creation under way
    started = time.monotonic()
    broker.send_signal(signal.SIGTERM)
    broker.wait(SIGTERM_BOUND_S)
    stopped_in = time.monotonic() - started
    created = sum(1 for p in range(LARGE) if broker.data_dir.joinpath(f"big-{p}").is_dir())
    assert stopped_in < SIGTERM_BOUND_S and created < LARGE, (stopped_in, created)

    started = time.monotonic()
    broker.start(timeout=30)
    with Connection(broker.bootstrap) as conn:
        assert conn.api_versions().error_code == 0
        assert len(conn.metadata(["big"]).topics["big"].partitions) == LARGE
    assert time.monotonic() - started < RESTART_BOUND_S

    pending = set(range(LARGE))
    batch = record_batch([(None, b"v")])
    with Connection(broker.bootstrap) as conn:

        def produce_to_pending() -> bool:
            for p in sorted(pending):
                code = conn.produce("big", p, batch, acks=1).error_code
                assert code in (0, NOT_LEADER_OR_FOLLOWER), code
                if code == 0:
                    pending.discard(p)
            return not pending

        assert wait_for(produce_to_pending, 180, 1.0), f"{len(pending)} partitions never took produce"


def test_confluent_admin_create_then_produce_to_the_fresh_topic(broker):
    topic = f"fresh-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=8, replication_factor=1)], operation_timeout=30)[
        topic
    ].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 30_000})
    delivered = []
    for p in range(8):
        producer.produce(topic, b"v", partition=p, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 8
