"""ZooKeeper mode boots: three `odradek serve` processes on a real ZooKeeper register, elect one
controller, create topics through any broker, fail the controller over after kill -9, wait for a
dead session's registration when started again at once (accepting connections only once registered),
refuse a live broker's id after that wait, and register again after a session expiry.

Every test gets its own chroot on one module-wide ZooKeeper server and its own three brokers
(zookeeper.session.timeout.ms 4000 unless a test sets another, so a killed broker's session expires
in seconds). Cluster state is read straight from ZooKeeper with kazoo, in Kafka's JSON, as an
operator with zkCli.sh would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import threading
import time

import pytest

from odradek.controller.zk import znodes
from odradek.network_client import NodeConnection
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.testing.broker import BrokerProcess, BrokerStartError
from odradek.testing.cluster import eventually
from tests.cluster.conftest import SESSION_TIMEOUT_MS

pytestmark = pytest.mark.slow

FAILOVER_BOUND_S = SESSION_TIMEOUT_MS / 1000 + 6
CREATE_TOPICS = 19


def create_topic(process: BrokerProcess, name: str, assignment: dict[int, list[int]]) -> int:
    """CreateTopics v5 sent to `process` itself (timeout 0: answered once the znodes are written)."""

    async def send() -> int:
        connection = NodeConnection(process.broker_id, process.host, process.port, client_id="cluster-test")
        await connection.connect()
        try:
            topic = CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
                    for p, r in assignment.items()
                ],
            )
            response = await connection.send(
                CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=0)
            )
            return response.topics[0].error_code
        finally:
            await connection.close()

    return asyncio.run(send())


def test_three_brokers_register_and_elect_one_controller(cluster):
    ids = eventually(
        lambda: sorted(cluster.zk.get_children(znodes.BROKER_IDS_PATH)) == ["1", "2", "3"], 15, "3 ids"
    )
    assert ids
    for broker_id, process in cluster.brokers.items():
        registration = cluster.read(znodes.broker_path(broker_id))
        assert registration["version"] == 5 and registration["jmx_port"] == -1
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{process.port}"]
        assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert (registration["host"], registration["port"]) == ("127.0.0.1", process.port)
        assert registration["rack"] == f"rack-{broker_id}"
    controller = eventually(cluster.controller, 15, "a controller")
    assert controller in (1, 2, 3)
    assert cluster.controller_epoch() == 1
    assert cluster.read(znodes.CLUSTER_ID_PATH)["id"]


def test_create_topics_through_a_broker_that_is_not_the_controller(cluster):
    controller = eventually(cluster.controller, 15, "a controller")
    other = next(b for b in cluster.brokers if b != controller)
    assignment = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert create_topic(cluster.brokers[other], "orders", assignment) == 0
    topic = cluster.read(znodes.topic_path("orders"))
    assert topic["version"] == 3
    assert topic["partitions"] == {str(p): r for p, r in assignment.items()}
    assert len(znodes.uuid_from_kafka(topic["topic_id"]).bytes) == 16
    assert cluster.read(znodes.entity_config_path("topics", "orders")) == {"version": 1, "config": {}}
    for partition, replicas in assignment.items():
        state = eventually(lambda p=partition: cluster.state("orders", p), 10, f"state of orders-{partition}")
        assert (state["leader"], state["leader_epoch"], state["isr"]) == (replicas[0], 0, replicas)
        assert state["controller_epoch"] == 1


def test_controller_failover_after_kill_9_moves_the_dead_brokers_leaders(cluster):
    controller = eventually(cluster.controller, 15, "a controller")
    alive = [b for b in cluster.brokers if b != controller]
    pair = {0: [controller, alive[0]], 1: [alive[0], controller], 2: [controller, alive[1]]}
    assert create_topic(cluster.brokers[alive[0]], "pair", pair) == 0
    assert create_topic(cluster.brokers[alive[1]], "solo", {0: [controller]}) == 0
    before = {
        (t, p): eventually(lambda t=t, p=p: cluster.state(t, p), 10, f"{t}-{p}")
        for t, p in [("pair", 0), ("pair", 1), ("pair", 2), ("solo", 0)]
    }
    killed_at = time.monotonic()
    cluster.brokers[controller].kill()

    successor = eventually(
        lambda: cluster.controller() not in (None, controller) and cluster.controller(),
        FAILOVER_BOUND_S,
        "a new controller",
    )
    assert successor in alive
    assert cluster.controller_epoch() == 2
    expected = {("pair", 0): alive[0], ("pair", 1): alive[0], ("pair", 2): alive[1], ("solo", 0): -1}

    def moved() -> bool:
        return all(
            (cluster.state(t, p) or {}).get("leader_epoch") == before[(t, p)]["leader_epoch"] + 1
            for t, p in expected
        )

    eventually(moved, FAILOVER_BOUND_S - (time.monotonic() - killed_at) + 2, "the dead broker's partitions")
    for (t, p), leader in expected.items():
        state, old = cluster.state(t, p), before[(t, p)]
        assert state["leader"] == leader, (t, p, state)
        assert state["leader_epoch"] == old["leader_epoch"] + 1 and state["controller_epoch"] == 2
        expected_isr = old["isr"] if leader == -1 else [r for r in old["isr"] if r != controller]
        assert state["isr"] == expected_isr, (t, p, state)

    cluster.brokers[controller].start()
    eventually(
        lambda: str(controller) in cluster.zk.get_children(znodes.BROKER_IDS_PATH), 15, "re-registration"
    )
    assert cluster.controller() == successor


WAITING_LINE = "is registered in ZooKeeper by another session"
RESTART_SESSION_TIMEOUT_MS = 10000


def accepting(process: BrokerProcess) -> bool:
    try:
        with socket.create_connection((process.host, process.port), timeout=1):
            return True
    except OSError:
        return False


def start_expecting_no_listener(process: BrokerProcess) -> None:
    with contextlib.suppress(BrokerStartError):
        process.start()


def broker_epoch(cluster, broker_id: int) -> int | None:
    stat = cluster.zk.exists(znodes.broker_path(broker_id))
    return stat.czxid if stat is not None else None


def test_a_broker_killed_and_started_at_once_waits_for_its_old_session_and_rejoins(start_cluster):
    """What a supervisor does: kill -9, start again at once. The dead session still holds the id; the
    new broker waits for it to expire instead of exiting, accepts connections only once registered,
    and follows its partitions into the ISR again. Sessions of RESTART_SESSION_TIMEOUT_MS, so the
    dead one is still there when the new broker, slow to boot on a busy machine, registers."""
    cluster = start_cluster(**{"zookeeper.session.timeout.ms": RESTART_SESSION_TIMEOUT_MS})
    controller = eventually(cluster.controller, 15, "a controller")
    assert create_topic(cluster.brokers[controller], "kept", {0: [1, 2, 3]}) == 0
    eventually(lambda: len((cluster.state("kept", 0) or {}).get("isr", ())) == 3, 15, "kept-0's ISR")
    victim = next(b for b in cluster.brokers if b != controller)
    process, old_epoch = cluster.brokers[victim], broker_epoch(cluster, victim)
    process.kill()
    starting = threading.Thread(target=process.start)
    starting.start()
    try:

        def registered_and_accepting() -> int | None:
            if not accepting(process):
                return None
            epoch = broker_epoch(cluster, victim)
            assert epoch not in (None, old_epoch), "the port accepted before the broker registered"
            return epoch

        new_epoch = eventually(registered_and_accepting, 30, "the restarted broker", interval_s=0.02)
    finally:
        starting.join(60)
    assert process.is_running() and new_epoch > old_epoch
    assert WAITING_LINE in process.output_tail()
    eventually(
        lambda: sorted(cluster.state("kept", 0)["isr"]) == [1, 2, 3], 30, f"broker {victim} back in the ISR"
    )


def test_a_broker_with_a_live_brokers_id_waits_then_exits_with_an_error(cluster):
    eventually(lambda: len(cluster.zk.get_children(znodes.BROKER_IDS_PATH)) == 3, 15, "3 ids")
    duplicate = cluster.broker(2, data="duplicate-2")
    duplicate.overrides["zookeeper.session.timeout.ms"] = 1000  # a wait of 1 s + the margin
    try:
        with pytest.raises(BrokerStartError):
            duplicate.start()  # it never accepted a connection
        assert duplicate.wait(30) == 1, duplicate.output_tail()
        output = duplicate.output_tail()
        assert WAITING_LINE in output
        assert "broker id 2 is already registered in ZooKeeper by a live broker" in output
    finally:
        duplicate.kill()
    assert cluster.brokers[2].is_running()
    assert json.loads(cluster.zk.get(znodes.broker_path(2))[0])["port"] == cluster.brokers[2].port


def test_a_broker_stopped_while_it_waits_to_register_shuts_down_cleanly(cluster):
    eventually(lambda: len(cluster.zk.get_children(znodes.BROKER_IDS_PATH)) == 3, 15, "3 ids")
    duplicate = cluster.broker(2, data="duplicate-2")
    duplicate.overrides["zookeeper.session.timeout.ms"] = 30000  # a wait longer than the test
    starting = threading.Thread(target=start_expecting_no_listener, args=(duplicate,))
    starting.start()
    try:
        eventually(lambda: WAITING_LINE in duplicate.output_tail(), 30, "the waiting line")
        duplicate.send_signal(signal.SIGTERM)
        assert duplicate.wait(15) == 0, duplicate.output_tail()
    finally:
        starting.join(60)
        duplicate.kill()
    assert "stops before it registered" in duplicate.output_tail()
    assert (duplicate.data_dir / ".kafka_cleanshutdown").exists()
    assert json.loads(cluster.zk.get(znodes.broker_path(2))[0])["port"] == cluster.brokers[2].port


def test_a_controller_whose_session_expired_resigns_and_registers_again(cluster):
    controller = eventually(cluster.controller, 15, "a controller")
    epoch_before = cluster.zk.exists(znodes.broker_path(controller)).czxid
    frozen = cluster.brokers[controller]
    frozen.send_signal(signal.SIGSTOP)
    try:
        successor = eventually(
            lambda: cluster.controller() not in (None, controller) and cluster.controller(),
            FAILOVER_BOUND_S,
            "a controller other than the frozen one",
        )
    finally:
        frozen.send_signal(signal.SIGCONT)
    assert cluster.controller_epoch() == 2

    def registered_again() -> bool:
        stat = cluster.zk.exists(znodes.broker_path(controller))
        return stat is not None and stat.czxid > epoch_before

    eventually(registered_again, 15, "registration in a new session")
    assert cluster.controller() == successor and cluster.controller_epoch() == 2
    assert "registered again after a session expiry" in frozen.output_tail()


def test_every_broker_serves_the_cluster_metadata_and_its_own_partitions(cluster):
    """The controller reaches the other brokers over the wire (RemoteChannel): every broker's Metadata
    lists the three brokers and each partition's leader, and confluent-kafka produces to and consumes
    from partitions led by each broker (replication factor 1: no replica fetchers yet)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    controller = eventually(cluster.controller, 15, "a controller")
    other = next(b for b in cluster.brokers if b != controller)
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    admin = AdminClient({"bootstrap.servers": cluster.brokers[other].bootstrap})
    admin.create_topics([NewTopic("spread", num_partitions=3, replica_assignment=[[1], [2], [3]])])[
        "spread"
    ].result(30)

    for process in cluster.brokers.values():
        metadata = eventually(
            lambda p=process: _spread_leaders(AdminClient({"bootstrap.servers": p.bootstrap})), 15, "leaders"
        )
        assert metadata == {0: 1, 1: 2, 2: 3}, (process.broker_id, metadata)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(30):
        producer.produce("spread", value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spread-readers"})
    consumer.assign([TopicPartition("spread", p, 0) for p in range(3)])
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < 30 and time.monotonic() < deadline:
        for message in consumer.consume(30, timeout=1):
            assert message.error() is None, message.error()
            got[message.partition()].append(message.value())
    consumer.close()
    assert got == {p: [b"v%d" % i for i in range(30) if i % 3 == p] for p in range(3)}


def _spread_leaders(admin) -> dict[int, int] | None:
    topics = admin.list_topics("spread", timeout=5).topics
    topic = topics.get("spread")
    if topic is None or topic.error is not None or len(topic.partitions) != 3:
        return None
    leaders = {p: m.leader for p, m in topic.partitions.items()}
    return (
        leaders
        if all(leader >= 0 for leader in leaders.values()) and len(admin.list_topics(timeout=5).brokers) == 3
        else None
    )
