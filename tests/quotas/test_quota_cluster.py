"""A quota changed at run time on a three-broker cluster (ZooKeeper): written through one broker,
it reaches every broker through `/config/changes`, and a producer writing to a partition led by each
broker moves to the new rate on all three within two quota windows."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import DescribeClientQuotasRequest
from odradek.testing.cluster import LocalCluster, eventually
from tests.quotas.helpers import PAYLOAD, QUOTA_WINDOW, Acks, MiB, configs, within
from tests.server.raw_client import RawClient

OLD_RATE, NEW_RATE = 256 * 1024, MiB
BEFORE_S, SETTLE_S, MEASURED_S = 6.0, 2.0, 16.0  # SETTLE_S: two windows of QUOTA_WINDOW


def described_rate(bootstrap: str) -> float | None:
    request = DescribeClientQuotasRequest(
        components=[DescribeClientQuotasRequest.ComponentData("client-id", 0, "moving")], strict=True
    )
    with RawClient(bootstrap) as client:
        response = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, request)
    values = [v.value for entry in response.entries or () for v in entry.values]
    return values[0] if values else None


def produce_to_every_broker(bootstrap: str, acks: dict[int, Acks], stop: threading.Event) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "moving",
            "linger.ms": 5,
            "batch.size": 100_000,
            "queue.buffering.max.kbytes": 4096,
        }
    )

    def on_delivery(partition: int) -> Callable[[object, object], None]:
        def delivered(err: object, _msg: object) -> None:
            if err is None:
                acks[partition].add(len(PAYLOAD))
            else:
                acks[partition].errors.append(str(err))

        return delivered

    callbacks = {p: on_delivery(p) for p in acks}
    sent = 0
    while not stop.is_set():
        partition = sent % len(acks)
        try:
            producer.produce("moving", PAYLOAD, partition=partition, callback=callbacks[partition])
            sent += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0


def test_a_quota_changed_while_clients_run_reaches_every_broker(start_cluster):
    cluster: LocalCluster = start_cluster(**QUOTA_WINDOW)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # partition p led by broker p + 1: the producer's quota group lives on each of the three brokers
    admin.create_topics([NewTopic("moving", num_partitions=3, replica_assignment=[[1], [2], [3]])])[
        "moving"
    ].result(30)
    first = cluster.brokers[1].bootstrap
    configs(first, "--alter", "--add-config", f"producer_byte_rate={OLD_RATE}",
            "--entity-type", "clients", "--entity-name", "moving")  # fmt: skip
    for process in cluster.brokers.values():
        eventually(
            lambda p=process: described_rate(p.bootstrap) == OLD_RATE, 10, "the first quota everywhere"
        )

    acks = {p: Acks() for p in range(3)}
    stop = threading.Event()
    worker = threading.Thread(
        target=produce_to_every_broker, args=(cluster.bootstrap, acks, stop), daemon=True
    )
    started = time.monotonic()
    worker.start()
    try:
        time.sleep(BEFORE_S)
        changed = time.monotonic()
        configs(first, "--alter", "--add-config", f"producer_byte_rate={NEW_RATE}",
                "--entity-type", "clients", "--entity-name", "moving")  # fmt: skip
        for process in cluster.brokers.values():  # every broker has it within the two windows
            assert described_rate(process.bootstrap) == NEW_RATE or eventually(
                lambda p=process: described_rate(p.bootstrap) == NEW_RATE, SETTLE_S, "the new quota"
            )
        time.sleep(max(0.0, changed + SETTLE_S + MEASURED_S - time.monotonic()))
    finally:
        stop.set()
        worker.join(120)
    settled = changed + SETTLE_S
    before = {p: a.rate(started + 2.0, changed) for p, a in acks.items()}
    after = {p: a.rate(settled, settled + MEASURED_S) for p, a in acks.items()}
    for partition in acks:
        assert acks[partition].errors == []
        assert before[partition] < NEW_RATE / 2, before  # held to the old quota
        assert within(after[partition], NEW_RATE), {p: r / MiB for p, r in after.items()}
