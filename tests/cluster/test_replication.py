"""Replication on a real cluster: three `odradek serve` processes on a real ZooKeeper, with
confluent-kafka as the client.

What must hold (the seeds' guarantees): every replica of a partition ends up with the leader's log,
byte for byte; acks=all answers only once min.insync.replicas have the batch, and is refused below
it while acks=1 goes on; a kill -9 of the leader during an idempotent acks=all load loses no
acknowledged record and duplicates none, offsets staying dense; a paused follower leaves the ISR
after replica.lag.time.max.ms and rejoins once it catches up.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic

from odradek.testing.cluster import LocalCluster, eventually
from tests.cluster.conftest import SESSION_TIMEOUT_MS
from tests.cluster.test_metrics import metrics_url
from tests.compat.helpers import QUIET, admin, consume
from tests.scrape import scrape
from tests.scrape import value as sample

pytestmark = pytest.mark.slow

LAG_MS = 3000  # replica.lag.time.max.ms of these brokers
TIMEOUT_S = 60
UNCLEAN = "unclean.leader.election.enable"


@pytest.fixture
def replicated(start_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_cluster(**{"replica.lag.time.max.ms": LAG_MS, "replica.fetch.backoff.ms": 200})


def create_replicated_topic(cluster: LocalCluster, name: str, partitions: int = 1) -> None:
    client = admin(cluster.bootstrap)
    topic = NewTopic(
        name, num_partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    client.create_topics([topic], operation_timeout=30)[name].result(30)
    for p in range(partitions):
        eventually(lambda p=p: len((cluster.state(name, p) or {}).get("isr", ())) == 3, 15, f"{name}-{p} ISR")


def segment_bytes(cluster: LocalCluster, broker_id: int, name: str, partition: int = 0) -> bytes:
    directory = cluster.data_dir / f"broker-{broker_id}" / f"{name}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def producer(cluster: LocalCluster, **conf: object) -> Producer:
    settings = {"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all", **QUIET}
    return Producer({**settings, **conf})


def produce_all(cluster: LocalCluster, topic: str, values: list[bytes], **conf: object) -> list[object]:
    """Produce `values` to partition 0; the delivery errors (empty when all were acknowledged)."""
    client = producer(cluster, **conf)
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for value in values:
        client.produce(topic, value=value, partition=0, on_delivery=on_delivery)
        client.poll(0)
    assert client.flush(TIMEOUT_S) == 0
    return errors


def test_every_replica_holds_the_leaders_log_byte_for_byte(replicated: LocalCluster) -> None:
    create_replicated_topic(replicated, "copied")
    assert produce_all(replicated, "copied", [b"value-%d" % i for i in range(2000)]) == []
    leader = replicated.state("copied", 0)["leader"]
    expected = segment_bytes(replicated, leader, "copied")
    assert len(expected) > 2000 * 7
    for broker_id in replicated.brokers:
        eventually(
            lambda b=broker_id: segment_bytes(replicated, b, "copied") == expected,
            15,
            f"broker {broker_id}'s copy",
        )
    read = consume(replicated.bootstrap, "copied", 2000)
    assert [m.value() for m in read] == [b"value-%d" % i for i in range(2000)]


def test_followers_copy_many_partitions_through_fetch_sessions(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    """Each follower holds one fetch session per leader over the partitions it follows there, and
    what later fetches carry (only the partitions that changed) keeps every copy the leader's."""
    cluster = start_cluster(**{"http.listeners": "http://127.0.0.1:0"})
    urls = {broker_id: metrics_url(process) for broker_id, process in cluster.brokers.items()}
    partitions = 12
    create_replicated_topic(cluster, "many", partitions)
    client = producer(cluster)

    def write_and_compare(rounds: range, to: range) -> None:
        for i in rounds:
            for p in to:
                client.produce("many", value=b"%d-%d" % (p, i), partition=p)
        assert client.flush(TIMEOUT_S) == 0
        for p in to:
            leader = cluster.state("many", p)["leader"]
            expected = segment_bytes(cluster, leader, "many", p)
            for broker_id in cluster.brokers:
                eventually(
                    lambda b=broker_id, p=p, e=expected: segment_bytes(cluster, b, "many", p) == e,
                    15,
                    f"broker {broker_id}'s copy of many-{p}",
                )

    write_and_compare(range(20), range(partitions))
    led = {b: sum(cluster.state("many", p)["leader"] == b for p in range(partitions)) for b in urls}
    for broker_id, url in urls.items():
        samples = scrape(url)
        followers = len(urls) - 1
        assert sample(samples, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == (
            followers if led[broker_id] else 0
        )
        cached = sample(samples, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
        assert cached == led[broker_id] * followers
    write_and_compare(range(20, 30), range(0, partitions, 5))  # incremental fetches carry these
    for process in cluster.brokers.values():
        assert "starting a new one" not in process.output_tail(1 << 20)


def test_kill_9_of_the_leader_under_idempotent_acks_all_load_loses_and_duplicates_nothing(
    replicated: LocalCluster,
) -> None:
    create_replicated_topic(replicated, "orders")
    old_leader = replicated.state("orders", 0)["leader"]
    client = producer(replicated, **{"enable.idempotence": True, "message.timeout.ms": 60000})
    acked: dict[bytes, int] = {}
    failures: list[object] = []
    lock = threading.Lock()

    def on_delivery(err: object, msg: object) -> None:
        with lock:
            if err is not None:
                failures.append(err)
            else:
                acked[msg.value()] = msg.offset()  # type: ignore[attr-defined]

    total = 6000
    for i in range(total):
        client.produce("orders", value=b"order-%06d" % i, partition=0, on_delivery=on_delivery)
        client.poll(0)
        if i == total // 3:
            eventually(
                lambda: client.poll(0.1) is not None and len(acked) > 500, 30, "first acknowledgements"
            )
            replicated.brokers[old_leader].kill()
        if i % 200 == 0:
            time.sleep(0.01)
    assert client.flush(TIMEOUT_S) == 0
    assert failures == []
    new_leader = replicated.state("orders", 0)["leader"]
    assert new_leader != old_leader and new_leader in replicated.brokers
    assert len(acked) == total
    read = consume(replicated.brokers[new_leader].bootstrap, "orders", total)
    values = [m.value() for m in read]
    assert sorted(values) == sorted(acked)  # nothing lost, nothing twice
    assert [m.offset() for m in read] == list(range(total))  # dense offsets
    # where each was acknowledged (librdkafka may acknowledge a batch it learns was persisted from a
    # later batch's answer without an offset: those are checked for presence only)
    assert all(acked[m.value()] in (None, m.offset()) for m in read)


def test_below_min_insync_replicas_acks_all_is_refused_and_acks_1_goes_on(replicated: LocalCluster) -> None:
    create_replicated_topic(replicated, "narrow")
    leader = replicated.state("narrow", 0)["leader"]
    for broker_id in [b for b in replicated.brokers if b != leader]:
        replicated.brokers[broker_id].kill()
    eventually(lambda: replicated.state("narrow", 0)["isr"] == [leader], 20, "the ISR down to the leader")
    errors = produce_all(replicated, "narrow", [b"refused"], **{"message.timeout.ms": 5000, "retries": 0})
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]  # type: ignore[attr-defined]
    assert produce_all(replicated, "narrow", [b"accepted"], acks="1") == []
    assert [m.value() for m in consume(replicated.bootstrap, "narrow", 1)] == [b"accepted"]


def test_a_paused_follower_leaves_the_isr_and_rejoins_after_catching_up(replicated: LocalCluster) -> None:
    create_replicated_topic(replicated, "paused")
    leader = replicated.state("paused", 0)["leader"]
    follower = next(b for b in replicated.brokers if b != leader)
    replicated.brokers[follower].send_signal(signal.SIGSTOP)
    try:
        assert produce_all(replicated, "paused", [b"while-paused-%d" % i for i in range(100)]) == []
        eventually(
            lambda: follower not in replicated.state("paused", 0)["isr"], LAG_MS / 1000 + 10, "the ISR shrink"
        )
        assert produce_all(replicated, "paused", [b"after-shrink-%d" % i for i in range(100)]) == []
    finally:
        replicated.brokers[follower].send_signal(signal.SIGCONT)
    eventually(lambda: follower in replicated.state("paused", 0)["isr"], 20, "the follower back in the ISR")
    expected = segment_bytes(replicated, leader, "paused")
    eventually(lambda: segment_bytes(replicated, follower, "paused") == expected, 15, "the follower's copy")


def test_admin_clients_describe_replicas_and_isr(replicated: LocalCluster) -> None:
    create_replicated_topic(replicated, "described", partitions=3)
    expected = {p: replicated.state("described", p) for p in range(3)}
    listed = admin(replicated.bootstrap).list_topics("described", timeout=10).topics["described"]
    for index, partition in listed.partitions.items():
        assert partition.leader == expected[index]["leader"]
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == sorted(expected[index]["isr"])
    client = KafkaAdminClient(bootstrap_servers=replicated.bootstrap.split(","))
    try:
        (described,) = client.describe_topics(["described"])
    finally:
        client.close()
    for partition in described["partitions"]:
        index = partition["partition_index"]
        assert partition["leader_id"] == expected[index]["leader"]
        assert sorted(partition["replica_nodes"]) == [1, 2, 3]
        assert sorted(partition["isr_nodes"]) == sorted(expected[index]["isr"])


def test_unclean_election_off_waits_for_the_isr_and_on_elects_an_out_of_sync_replica(
    replicated: LocalCluster,
) -> None:
    topics = {"clean": {}, "unclean": {UNCLEAN: "true"}}
    client = KafkaAdminClient(bootstrap_servers=replicated.bootstrap.split(","))
    try:  # confluent-kafka 2.16 refuses a replica assignment client-side, kafka-python sends it
        client.create_topics(
            [
                KafkaNewTopic(name, -1, -1, replica_assignments={0: [1, 2]}, topic_configs=configs)
                for name, configs in topics.items()
            ]
        )
    finally:
        client.close()
    for name in topics:
        eventually(lambda n=name: (replicated.state(n, 0) or {}).get("isr") == [1, 2], 15, f"{name} ISR")
    replicated.brokers[2].send_signal(signal.SIGSTOP)
    try:
        for name in topics:
            shrunk = LAG_MS / 1000 + 15
            eventually(lambda n=name: replicated.state(n, 0)["isr"] == [1], shrunk, f"{name} shrink")
            assert produce_all(replicated, name, [b"only-on-1-%d" % i for i in range(10)], acks="1") == []
        replicated.brokers[1].kill()
    finally:
        replicated.brokers[2].send_signal(signal.SIGCONT)
    eventually(lambda: replicated.state("unclean", 0)["leader"] == 2, 30, "the out-of-sync replica leading")
    assert replicated.state("clean", 0)["leader"] == -1  # waits for broker 1, the only ISR member
    logs = "".join(p.output_path.read_text(errors="replace") for p in replicated.brokers.values())
    assert "Unclean leader election for unclean-0: broker 2 was not in the ISR [1]" in logs
    replicated.brokers[1].restart()
    eventually(lambda: replicated.state("clean", 0)["leader"] == 1, 30, "broker 1 leading again")
    read = consume(replicated.brokers[1].bootstrap, "clean", 10)
    assert [m.value() for m in read] == [b"only-on-1-%d" % i for i in range(10)]  # nothing lost
    eventually(
        lambda: segment_bytes(replicated, 1, "unclean") == segment_bytes(replicated, 2, "unclean"),
        20,
        "broker 1 truncated to the unclean leader's log",
    )


def test_leadership_returns_to_the_preferred_replica_after_it_comes_back(
    start_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_cluster(**{"leader.imbalance.check.interval.seconds": 2, "replica.fetch.backoff.ms": 200})
    create_replicated_topic(cluster, "balanced", partitions=3)
    preferred = {p: cluster.read("/brokers/topics/balanced")["partitions"][str(p)][0] for p in range(3)}
    assert {p: cluster.state("balanced", p)["leader"] for p in range(3)} == preferred
    victim = next(b for b in preferred.values() if b != cluster.controller())
    cluster.brokers[victim].kill()
    eventually(
        lambda: victim not in {cluster.state("balanced", p)["leader"] for p in range(3)},
        SESSION_TIMEOUT_MS / 1000 + 10,
        "leaders moved off the killed broker",
    )
    cluster.brokers[victim].restart()
    eventually(
        lambda: {p: cluster.state("balanced", p)["leader"] for p in range(3)} == preferred,
        30,
        "every partition led by its preferred replica again",
    )
