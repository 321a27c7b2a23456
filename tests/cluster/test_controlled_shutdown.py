"""Controlled shutdown on a real cluster: three `odradek serve` processes on a real ZooKeeper, with
confluent-kafka as the client.

What must hold: a broker sent SIGTERM (a partition leader, or the controller) first has the
controller move the leadership of every partition it leads to another ISR member and take it out of
the ISRs it follows, says so in one log line, and exits 0; an idempotent acks=all producer writing
to every partition meanwhile sees no error and loses no acknowledged record.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.test_replication import TIMEOUT_S, create_replicated_topic, producer
from tests.compat.helpers import consume

pytestmark = pytest.mark.slow

PARTITIONS = 6
TOPIC = "payments"


@pytest.fixture
def replicated(start_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_cluster(**{"replica.fetch.backoff.ms": 200, "controlled.shutdown.retry.backoff.ms": 1000})


class Load:
    """An idempotent acks=all producer writing to every partition in a thread until stopped."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._client = producer(cluster, **{"enable.idempotence": True, "message.timeout.ms": 60000})
        self.acked: dict[int, dict[bytes, int]] = {p: {} for p in range(PARTITIONS)}
        self.failures: list[object] = []
        self.produced = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load")

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def acknowledged(self) -> int:
        with self._lock:
            return sum(len(values) for values in self.acked.values())

    def _on_delivery(self, err: object, msg: object) -> None:
        with self._lock:
            if err is not None:
                self.failures.append(err)
            else:
                self.acked[msg.partition()][msg.value()] = msg.offset()  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            partition = self.produced % PARTITIONS
            self._client.produce(
                TOPIC, value=b"pay-%06d" % self.produced, partition=partition, on_delivery=self._on_delivery
            )
            self.produced += 1
            self._client.poll(0)
            time.sleep(0.002)
        self.remaining = self._client.flush(TIMEOUT_S)


def shut_down_under_load(cluster: LocalCluster, pick: Callable[[], int | None]) -> int:
    """SIGTERM the broker `pick()` names while the load runs; check what must hold; its id."""
    create_replicated_topic(cluster, TOPIC, PARTITIONS)
    with Load(cluster) as load:
        eventually(lambda: load.acknowledged() > 300, 30, "first acknowledgements")
        victim = pick()
        led = [p for p in range(PARTITIONS) if cluster.state(TOPIC, p)["leader"] == victim]
        assert cluster.brokers[victim].stop(TIMEOUT_S) == 0, cluster.brokers[victim].output_tail()
        for p in range(PARTITIONS):
            state = cluster.state(TOPIC, p)
            assert state["leader"] != victim and state["leader"] in cluster.brokers, (p, state)
            assert victim not in state["isr"], (p, state)
        before = load.acknowledged()
        eventually(lambda: load.acknowledged() > before + 300, 30, "acknowledgements after the shutdown")
    assert load.remaining == 0 and load.failures == []
    line = f"Controlled shutdown of broker {victim}: moved {len(led)} partitions, 0 remain"
    assert re.search(re.escape(line), cluster.brokers[victim].output_tail(1 << 20)), line
    assert load.acknowledged() == load.produced
    for p, acked in load.acked.items():
        read = consume(cluster.bootstrap, TOPIC, len(acked), partition=p)
        assert sorted(m.value() for m in read) == sorted(acked)  # nothing lost, nothing twice
        # librdkafka acknowledges a batch it learns was persisted only from a later batch's answer
        # (idempotence) without an offset: those are checked for presence only
        assert all(acked[m.value()] in (None, m.offset()) for m in read)  # in place
    return victim


def test_sigterm_of_a_partition_leader_moves_its_leadership_first(replicated: LocalCluster) -> None:
    shut_down_under_load(replicated, lambda: replicated.state(TOPIC, 0)["leader"])


def test_sigterm_of_the_controller_moves_its_leadership_before_it_resigns(replicated: LocalCluster) -> None:
    victim = shut_down_under_load(replicated, replicated.controller)
    new_controller = eventually(replicated.controller, 15, "a new controller")
    assert new_controller != victim
