"""The controller's channel follows the live brokers whatever the order of a controller failover and
a broker's registration. (A broker that registered while the controller failed over was counted as
live by the new controller but never added to its channel: it got no LeaderAndIsr and no
UpdateMetadata, and its partitions stayed under-replicated until some later membership change.)

Broker 1 runs in this process (`InProcessBroker`), so the test can hold its election at a chosen
point while a real broker process registers in ZooKeeper; the first controller, another real
process, is killed with -9. The points, each its own case: once the new controller won the seat but
before it read the live brokers, right after that read (the order of the original failure: the
registration's watch fires while no controller is installed yet), and once it finished starting. (A
registration before the seat is won cannot be ordered: the late broker would race for the seat.) In
every order, within HEAL_S: broker 1 is controller and its channel reaches every live broker, the
late broker's Metadata names the new controller and both live brokers, every partition's ISR in
ZooKeeper is the two live brokers, and an acks=all produce succeeds on every partition."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.server.kafka_server import KafkaServer
from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import LocalCluster, eventually, metadata_view
from odradek.testing.inprocess import InProcessBroker
from odradek.testing.zookeeper import ZooKeeperServer

TOPIC = "failover"
PARTITIONS = 3
SESSION_TIMEOUT_MS = 4000
HEAL_S = 30.0
QUIET = {"log_level": 3}
# where broker 1's takeover is held while the late broker registers: (store method, before it runs)
HOLD_POINTS: dict[str, tuple[str, bool] | None] = {
    "before-read": ("read_brokers", True),  # the seat won, the live brokers not read yet
    "after-read": ("read_brokers", False),
    "after-startup": None,  # registered once broker 1 is controller
}


def hold_once(store: Any, method: str, before: bool, job: Callable[[], Awaitable[None]]) -> None:
    """Make the next call of `store.<method>` run `job` before or after it, on the store's loop."""
    original = getattr(store, method)

    async def held(*args: Any, **kwargs: Any) -> Any:
        del store.__dict__[method]  # once
        if before:
            await job()
        result = await original(*args, **kwargs)
        if not before:
            await job()
        return result

    setattr(store, method, held)


def registration(process: BrokerProcess, seen_by: KafkaServer) -> Callable[[], Awaitable[None]]:
    """Start `process` and wait until `seen_by`'s store has its registration (the watch fired)."""

    async def register() -> None:
        await asyncio.to_thread(process.start)
        while process.broker_id not in seen_by.store.brokers():  # type: ignore[attr-defined]
            await asyncio.sleep(0.02)

    return register


def create_topic(cluster: LocalCluster, controller: int) -> None:
    """The topic, created through the controller once every broker's Metadata names it and all three
    brokers (librdkafka's admin client, asking a broker that does not know the controller yet, waits
    for the controller until its request times out)."""
    for process in cluster.brokers.values():
        eventually(lambda p=process: metadata_view(p) == (controller, [1, 2, 3]), HEAL_S, "every broker")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[controller].bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=30)[TOPIC].result(30)
    eventually(lambda: all_isrs(cluster) == {(1, 2, 3)}, HEAL_S, "full ISRs")


def all_isrs(cluster: LocalCluster) -> set[tuple[int, ...]]:
    return {tuple(sorted((cluster.state(TOPIC, p) or {}).get("isr", ()))) for p in range(PARTITIONS)}


def healing(cluster: LocalCluster, here: KafkaServer, late: BrokerProcess) -> dict[str, object]:
    """What the liveness checks see now: each is healed when it equals its `expected` value."""
    controller = here.controller
    return {
        "live brokers in the controller": None if controller is None else sorted(controller.live_brokers),
        "unreached by its channel": None if controller is None else sorted(controller.unreached_brokers()),
        "late broker's metadata": metadata_view(late),
        "ISRs": all_isrs(cluster),
    }


def produce_to_every_partition(bootstrap: str) -> list[object]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000, **QUIET})
    errors: list[object] = []
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, b"after", partition=partition, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(20)
    return errors


@pytest.mark.parametrize("order", list(HOLD_POINTS))
def test_a_broker_registering_during_a_failover_gets_its_partitions(
    zookeeper: ZooKeeperServer, tmp_path: Path, order: str
) -> None:
    cluster = LocalCluster(
        tmp_path, 3, zookeeper_connect=zookeeper.connect_string, session_timeout_ms=SESSION_TIMEOUT_MS
    )
    cluster.start(processes=(2, 3))
    here = InProcessBroker(
        tmp_path / "broker-1",
        {
            "broker.id": 1,
            "zookeeper.connect": cluster.connect,
            "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
            "broker.rack": "rack-1",
        },
    )
    try:
        first = eventually(cluster.controller, HEAL_S, "a controller")  # broker 2 or 3
        here.start()
        late = cluster.brokers[5 - first]
        create_topic(cluster, first)
        late.stop()  # gracefully: its registration goes at once
        eventually(lambda: late.broker_id not in cluster.live_broker_ids(), HEAL_S, "the late broker gone")
        point = HOLD_POINTS[order]
        if point is not None:
            hold_once(here.broker.store, *point, registration(late, here.broker))
        cluster.brokers[first].kill()
        eventually(
            lambda: here.broker.controller is not None, 3 * SESSION_TIMEOUT_MS / 1000, "broker 1 elected"
        )
        if point is None:
            late.start()
        expected = {
            "live brokers in the controller": [1, late.broker_id],
            "unreached by its channel": [],
            "late broker's metadata": (1, [1, late.broker_id]),
            "ISRs": {(1, late.broker_id)},
        }
        seen: list[dict[str, object]] = []

        def healed() -> bool:
            seen.append(healing(cluster, here.broker, late))
            return seen[-1] == expected

        try:
            eventually(healed, HEAL_S, "healed", interval_s=0.25)
        except AssertionError:
            pytest.fail(
                f"not healed in {HEAL_S} s: saw {seen[-1]}, expected {expected}; "
                f"broker {late.broker_id}'s output:\n{late.output_tail(3000)}"
            )
        assert produce_to_every_partition(here.bootstrap) == [None] * PARTITIONS
    finally:
        here.stop()
        cluster.close()
