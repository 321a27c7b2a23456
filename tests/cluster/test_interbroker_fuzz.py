"""Protocol fuzzing of the inter-broker APIs against members of a three-broker ZooKeeper cluster.

One cluster for the module (brokers 1..3 on the module's ZooKeeper) with three topics of replication
factor 3 (CANARY, holding acknowledged records; TARGET, three partitions, the one the fuzzed requests
name) and NARROW (replication factor 2, so one broker is no replica of it).

Malformed frames: LeaderAndIsr v2-7, UpdateMetadata v5-8, StopReplica v3-4, AlterPartition v0-3,
ControlledShutdown v1-3 and follower Fetch v4-17 are encoded from the generated message classes,
then bit-flipped, truncated (the size prefix following), spliced with garbage, given a garbage body,
a struct array whose count lies (huge, negative, zero or one), a size prefix claiming more than
is sent (or negative), or pipelined several at a time, and sent raw to the controller and to
another broker. The request header and the fields that fence a request (controller id and epoch,
broker id and epoch, replica id) are never mutated, and they are stale, or name a broker that leads
no partition of the topic an AlterPartition asks about: whatever still decodes is refused, so
nothing the fuzzer sends may change state. After every frame the broker is alive and a connection opened
before the run gets ApiVersions and the same Metadata answered; after the run ZooKeeper's partition
states and every broker's Metadata answer are unchanged, the canary reads back record for record,
and no broker logged a traceback.

Well-formed but refused requests: LeaderAndIsr, UpdateMetadata and StopReplica (delete) with a stale
controller or broker epoch; AlterPartition to a non-controller, with a stale broker epoch, from a
follower, with stale leader and partition epochs; ControlledShutdown with a stale broker epoch; a
follower Fetch from a broker that is no replica; a Fetch with a fenced current leader epoch. Each is
answered with its error and changes nothing: ZooKeeper, Metadata, leadership, replication and the
data stay as they were.
"""

from __future__ import annotations

import copy
import dataclasses
import signal
import struct
import uuid
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.controller.zk import znodes
from odradek.protocol.api_keys import API_SPECS, ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)
from odradek.protocol.messages.alter_partition import AlterPartitionRequest
from odradek.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from odradek.protocol.messages.fetch import FetchRequest, FetchResponse
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from odradek.protocol.messages.stop_replica import StopReplicaRequest
from odradek.protocol.messages.update_metadata import UpdateMetadataRequest
from odradek.protocol.primitives import unsigned_varint_bytes
from odradek.testing.cluster import LocalCluster, eventually
from odradek.testing.zookeeper import ZooKeeperServer
from tests.cluster.conftest import SESSION_TIMEOUT_MS
from tests.compat import wire
from tests.compat.helpers import admin
from tests.compat.test_fuzz import LYING_COUNTS, send_and_drain

pytestmark = pytest.mark.slow

CANARY = "ib-fuzz-canary-acknowledged"
TARGET = "ibf"  # a different length from the other names: no mutation retargets them
NARROW = "ib-fuzz-narrow"
TOPICS = {CANARY: (1, 3), TARGET: (3, 3), NARROW: (1, 2)}  # partitions, replication factor
EXAMPLES = 300
EPOCH_AHEAD = 10  # a leader epoch newer than any the cluster reached: applied, it would take effect
VERSIONS = {
    ApiKey.LEADER_AND_ISR: range(2, 8),
    ApiKey.UPDATE_METADATA: range(5, 9),
    ApiKey.STOP_REPLICA: range(3, 5),
    ApiKey.ALTER_PARTITION: range(0, 4),
    ApiKey.CONTROLLED_SHUTDOWN: range(1, 4),
    ApiKey.FETCH: range(4, 18),
}
FENCE_FIELDS = ("controller_id", "controller_epoch", "broker_id", "broker_epoch", "replica_id")
LIES = (*LYING_COUNTS, -1, 0, 1)
SENTINEL = 0x5EEDC0DE  # an array count no request holds, replaced by a lie once encoded
TIMEOUT_S = 30
MISSING_BROKER = 99  # no broker of the cluster


# --- the cluster ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ib_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    made = LocalCluster(
        tmp_path_factory.mktemp("ib-fuzz"),
        3,
        zookeeper_connect=zookeeper.connect_string,
        session_timeout_ms=SESSION_TIMEOUT_MS,
    )
    try:
        made.start()
        made.wait_for_controller()
        for name, (partitions, replication) in TOPICS.items():
            create_topic(made, name, partitions, replication)
        with wire.Connection(leader_bootstrap(made, CANARY)) as conn:
            batch = wire.record_batch([(b"k%d" % i, b"acknowledged-%d" % i) for i in range(10)])
            assert conn.produce(CANARY, 0, batch).error_code == 0
        yield made
    finally:
        made.close()


def create_topic(cluster: LocalCluster, name: str, partitions: int, replication: int) -> None:
    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication)
    client = admin(cluster.bootstrap)  # held until the result: a collected client cancels it
    client.create_topics([topic], operation_timeout=30)[name].result(30)
    for p in range(partitions):
        eventually(lambda p=p: len(isr(cluster, name, p)) == replication, 15, f"{name}-{p} ISR")


def isr(cluster: LocalCluster, topic: str, partition: int = 0) -> list[int]:
    return (cluster.state(topic, partition) or {}).get("isr", [])


def leader(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    return cluster.state(topic, partition)["leader"]


def leader_bootstrap(cluster: LocalCluster, topic: str, partition: int = 0) -> str:
    return cluster.brokers[leader(cluster, topic, partition)].bootstrap


def broker_epoch(cluster: LocalCluster, broker_id: int) -> int:
    """The broker's registration epoch: the czxid of its /brokers/ids znode."""
    assert cluster.zk is not None
    return cluster.zk.exists(znodes.broker_path(broker_id)).czxid


def partition_epoch(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    """The partition epoch: the version of its state znode."""
    assert cluster.zk is not None
    return cluster.zk.get(znodes.partition_state_path(topic, partition))[1].version


def topic_id(cluster: LocalCluster, topic: str) -> uuid.UUID:
    return znodes.uuid_from_kafka(cluster.read(znodes.topic_path(topic))["topic_id"])


def non_controller(cluster: LocalCluster) -> int:
    return next(b for b in sorted(cluster.brokers) if b != cluster.controller())


# --- what must not change ------------------------------------------------------------------------


def snapshot(cluster: LocalCluster) -> tuple[dict, dict]:
    """ZooKeeper's partition states (with their partition epochs) and every broker's Metadata."""
    states = {
        (name, p): (cluster.state(name, p), partition_epoch(cluster, name, p))
        for name, (partitions, _) in TOPICS.items()
        for p in range(partitions)
    }
    return states, {b: metadata(process.bootstrap) for b, process in cluster.brokers.items()}


def metadata(bootstrap: str) -> wire.MetadataResult:
    with wire.Connection(bootstrap) as conn:
        return conn.metadata(list(TOPICS))


def canary_records(cluster: LocalCluster) -> list[wire.Record]:
    with wire.Connection(leader_bootstrap(cluster, CANARY)) as conn:
        return conn.read_all(CANARY)


def assert_no_traceback(cluster: LocalCluster) -> None:
    for broker_id, process in cluster.brokers.items():
        output = process.output_path.read_text(errors="replace")
        assert "Traceback" not in output, f"broker {broker_id} logged a traceback:\n{output[-4000:]}"


# --- requests ------------------------------------------------------------------------------------


def frame(api_key: int, version: int, body: bytes) -> bytes:
    header = encode_request_header(RequestHeader(api_key, version, 7, "ib-fuzz"))
    return struct.pack(">i", len(header) + len(body)) + header + body


def call(bootstrap: str, api_key: int, version: int, request: Any) -> Any:
    """Send one request on a new connection and decode the answer."""
    with closing(wire.connect(bootstrap)) as sock:
        sock.sendall(frame(api_key, version, encode_request(api_key, version, request)))
        (size,) = struct.unpack(">i", wire.recv_exactly(sock, 4))
        payload = wire.recv_exactly(sock, size)
    _, start = parse_response_header(payload, response_header_version(api_key, version))
    return decode_response(api_key, version, payload[start:])


@dataclasses.dataclass(frozen=True)
class Fence:
    """The fields a controller request is checked by (on the receiving broker)."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int


def leader_and_isr(
    cluster: LocalCluster, fence: Fence, topic: str, claimed_leader: int
) -> LeaderAndIsrRequest:
    """Every partition of `topic` led by `claimed_leader` under a newer leader epoch."""
    partitions, _ = TOPICS[topic]
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    states = [
        state(
            topic_name=topic,
            partition_index=p,
            controller_epoch=fence.controller_epoch,
            leader=claimed_leader,
            leader_epoch=cluster.state(topic, p)["leader_epoch"] + EPOCH_AHEAD,
            isr=[claimed_leader],
            partition_epoch=partition_epoch(cluster, topic, p) + EPOCH_AHEAD,
            replicas=sorted(cluster.brokers),
        )
        for p in range(partitions)
    ]
    return LeaderAndIsrRequest(
        **dataclasses.asdict(fence),
        topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(topic, topic_id(cluster, topic), states)],
        live_leaders=[
            LeaderAndIsrRequest.LeaderAndIsrLiveLeader(b, p.host, p.port) for b, p in cluster.brokers.items()
        ],
    )


def update_metadata(
    cluster: LocalCluster, fence: Fence, topic: str, only_broker: int
) -> UpdateMetadataRequest:
    """A cluster of `only_broker` alone, leading no partition of `topic`."""
    partitions, _ = TOPICS[topic]
    state = UpdateMetadataRequest.UpdateMetadataPartitionState
    process = cluster.brokers[only_broker]
    endpoint = UpdateMetadataRequest.UpdateMetadataEndpoint(process.port, process.host, "PLAINTEXT", 0)
    return UpdateMetadataRequest(
        **dataclasses.asdict(fence),
        topic_states=[
            UpdateMetadataRequest.UpdateMetadataTopicState(
                topic,
                topic_id(cluster, topic),
                [state(topic, p, fence.controller_epoch, -1, 99) for p in range(partitions)],
            )
        ],
        live_brokers=[UpdateMetadataRequest.UpdateMetadataBroker(only_broker, endpoints=[endpoint])],
    )


def stop_replica(cluster: LocalCluster, fence: Fence, topic: str) -> StopReplicaRequest:
    """Stop and delete every partition of `topic`, under a newer leader epoch."""
    partitions, _ = TOPICS[topic]
    states = [
        StopReplicaRequest.StopReplicaPartitionState(
            p, cluster.state(topic, p)["leader_epoch"] + EPOCH_AHEAD, delete_partition=True
        )
        for p in range(partitions)
    ]
    return StopReplicaRequest(
        **dataclasses.asdict(fence), topic_states=[StopReplicaRequest.StopReplicaTopicState(topic, states)]
    )


def alter_partition(
    cluster: LocalCluster, broker_id: int, epoch: int, topic: str, new_isr: list[int], epochs: tuple[int, int]
) -> AlterPartitionRequest:
    """`broker_id` asks for partition 0 of `topic` to have `new_isr`, at (leader, partition) `epochs`."""
    members = [AlterPartitionRequest.BrokerState(b, broker_epoch(cluster, b)) for b in new_isr]
    data = AlterPartitionRequest.PartitionData(
        0, epochs[0], new_isr=new_isr, new_isr_with_epochs=members, partition_epoch=epochs[1]
    )
    return AlterPartitionRequest(
        broker_id, epoch, [AlterPartitionRequest.TopicData(topic, topic_id(cluster, topic), [data])]
    )


def replica_fetch(
    cluster: LocalCluster, replica: int, topic: str, partition: int, offset: int, leader_epoch: int = -1
) -> FetchRequest:
    """A fetch by broker `replica` (-1: a consumer) of one partition from `offset`, answered at once."""
    fetched = FetchRequest.FetchPartition(
        partition, leader_epoch, offset, log_start_offset=0, partition_max_bytes=1 << 20
    )
    state = FetchRequest.ReplicaState(replica, broker_epoch(cluster, replica) if replica >= 0 else -1)
    return FetchRequest(
        replica_id=replica,
        replica_state=state if replica >= 0 else None,
        max_bytes=1 << 20,
        topics=[FetchRequest.FetchTopic(topic, topic_id(cluster, topic), [fetched])],
    )


# --- malformed frames ----------------------------------------------------------------------------

Base = tuple[int, int, Any]  # API key, version, request


def refused_requests(cluster: LocalCluster, target: int) -> list[Base]:
    """Requests of every API and version that `target` must refuse whatever follows their fencing
    fields: stale controller and broker epochs, and an AlterPartition from a broker under its
    current epoch that leads no partition of CANARY (the controller decides that one partition by
    partition, so the fuzzed bytes reach its decisions)."""
    stale = Fence(cluster.controller() or 0, cluster.controller_epoch() - 1, 1)
    other = next(b for b in sorted(cluster.brokers) if b != target)
    led = next((p for p in range(TOPICS[TARGET][0]) if leader(cluster, TARGET, p) == target), 0)
    canary_follower = next(b for b in isr(cluster, CANARY) if b != leader(cluster, CANARY))
    requests = [
        (ApiKey.LEADER_AND_ISR, leader_and_isr(cluster, stale, TARGET, target)),
        (ApiKey.UPDATE_METADATA, update_metadata(cluster, stale, TARGET, target)),
        (ApiKey.STOP_REPLICA, stop_replica(cluster, stale, TARGET)),
        (ApiKey.ALTER_PARTITION, isr_shrink(cluster, leader(cluster, TARGET), 1, TARGET)),
        (
            ApiKey.ALTER_PARTITION,
            isr_shrink(cluster, canary_follower, broker_epoch(cluster, canary_follower), CANARY),
        ),
        (ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest(other, 1)),
        (ApiKey.FETCH, replica_fetch(cluster, other, TARGET, led, 0)),
    ]
    bases = [
        (key, v, r)
        for key, r in requests
        for v in VERSIONS[key]
        if (key, v) != (ApiKey.CONTROLLED_SHUTDOWN, 1)
    ]
    # ControlledShutdown v1 carries no broker epoch: it may only name a broker that is not live
    return [*bases, (ApiKey.CONTROLLED_SHUTDOWN, 1, ControlledShutdownRequest(MISSING_BROKER))]


def isr_shrink(cluster: LocalCluster, asker: int, epoch: int, topic: str) -> AlterPartitionRequest:
    """`asker` (under broker epoch `epoch`) asks for partition 0 of `topic` to have an ISR of itself."""
    state = cluster.state(topic, 0)
    return alter_partition(
        cluster, asker, epoch, topic, [asker], (state["leader_epoch"], partition_epoch(cluster, topic))
    )


def fence_end(api_key: int, version: int, request: Any) -> int:
    """Where the fencing fields end in the encoded body (0 when the version has none up front)."""
    names = [n for n in FENCE_FIELDS if hasattr(request, n)]
    flipped = dataclasses.replace(request, **{n: ~getattr(request, n) for n in names})
    honest, other = encode_request(api_key, version, request), encode_request(api_key, version, flipped)
    return max((i + 1 for i, (a, b) in enumerate(zip(honest, other, strict=True)) if a != b), default=0)


class LyingList(list):
    """A list whose length, as the encoder writes it, is `count`; its real elements follow."""

    def __init__(self, items: list[Any], count: int) -> None:
        super().__init__(items)
        self.count = count

    def __len__(self) -> int:
        return self.count


def struct_arrays(message: Any) -> list[tuple[Any, str]]:
    """Every non-empty array of structs in `message`, as (owner, field name)."""
    found = []
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            found.append((message, f.name))
            for item in value:
                found += struct_arrays(item)
        elif dataclasses.is_dataclass(value):
            found += struct_arrays(value)
    return found


def count_bytes(count: int, flexible: bool) -> bytes:
    return unsigned_varint_bytes(count + 1) if flexible else struct.pack(">i", count)


@st.composite
def lying_body(draw: st.DrawFn, api_key: int, version: int, request: Any) -> bytes:
    """The request with one of its struct arrays announcing a count it does not hold: encoded with
    the SENTINEL count, whose encoding is then replaced by the lie's (which may be negative)."""
    request = copy.deepcopy(request)
    arrays = struct_arrays(request)
    if not arrays:
        return encode_request(api_key, version, request)
    owner, name = draw(st.sampled_from(arrays))
    setattr(owner, name, LyingList(getattr(owner, name), SENTINEL))
    flexible = API_SPECS[api_key].request_flexible
    flexible = not flexible.empty and version >= flexible.lo
    lie = draw(st.sampled_from([n for n in LIES if n >= -1 or not flexible]))
    body = encode_request(api_key, version, request)
    return body.replace(count_bytes(SENTINEL, flexible), count_bytes(lie, flexible), 1)


@st.composite
def malformed_body(draw: st.DrawFn, api_key: int, version: int, request: Any) -> bytes:
    body = encode_request(api_key, version, request)
    fence = fence_end(api_key, version, request)
    kind = draw(st.sampled_from(["flip", "truncate", "splice", "garbage", "lie"]))
    if kind == "flip" and fence < len(body):
        mutable = bytearray(body)
        for bit in draw(st.lists(st.integers(fence * 8, len(body) * 8 - 1), min_size=1, max_size=8)):
            mutable[bit // 8] ^= 1 << (bit % 8)
        return bytes(mutable)
    if kind == "truncate":
        return body[: draw(st.integers(0, len(body) - 1))]
    if kind == "garbage":
        return body[:fence] + draw(st.binary(max_size=128))
    if kind == "lie":
        return draw(lying_body(api_key, version, request))
    at = draw(st.integers(fence, len(body)))
    return body[:at] + draw(st.binary(min_size=1, max_size=64)) + body[at:]


@st.composite
def malformed_frame(draw: st.DrawFn, bases: list[Base]) -> bytes:
    api_key = draw(st.sampled_from(sorted({key for key, _, _ in bases})))
    _, version, request = draw(st.sampled_from([b for b in bases if b[0] == api_key]))
    data = frame(api_key, version, draw(malformed_body(api_key, version, request)))
    if draw(st.integers(0, 7)) == 0:  # a size prefix claiming more than is sent, or negative
        size = draw(st.one_of(st.integers(len(data) - 3, 2**31 - 1), st.integers(-(2**31), -1)))
        data = struct.pack(">i", size) + data[4:]
    return data


def fuzz_input(bases: list[Base]) -> st.SearchStrategy[bytes]:
    return st.one_of(
        malformed_frame(bases), st.lists(malformed_frame(bases), min_size=2, max_size=3).map(b"".join)
    )


# The strategies draw only from hypothesis; a client thread still running in this process (the
# kafka-python clients of other tests use the global `random`) can move it while they draw, which
# hypothesis reports as a strategy using `random` (and then fails on the size of its own message).
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.filterwarnings("ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning")
@pytest.mark.parametrize("role", ["controller", "other broker"])
def test_malformed_inter_broker_frames_change_nothing(ib_cluster: LocalCluster, role: str) -> None:
    target = ib_cluster.controller() if role == "controller" else non_controller(ib_cluster)
    assert target is not None
    process = ib_cluster.brokers[target]
    bases = refused_requests(ib_cluster, target)
    before, records = snapshot(ib_cluster), canary_records(ib_cluster)
    bystander = wire.Connection(process.bootstrap, timeout=TIMEOUT_S)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(fuzz_input(bases))
    def fuzz(data: bytes) -> None:
        send_and_drain(process.bootstrap, data)
        assert process.is_running(), f"broker {target} died on {data[:200]!r}:\n{process.output_tail()}"
        assert bystander.api_versions().error_code == 0
        assert bystander.metadata(list(TOPICS)) == before[1][target], f"metadata changed by {data[:200]!r}"

    try:
        fuzz()
    finally:
        bystander.close()
    assert snapshot(ib_cluster) == before
    assert canary_records(ib_cluster) == records
    assert_no_traceback(ib_cluster)


# --- well-formed, refused ------------------------------------------------------------------------


def stale_fences(cluster: LocalCluster, broker_id: int) -> dict[ErrorCode, Fence]:
    controller, epoch = cluster.controller() or 0, cluster.controller_epoch()
    return {
        ErrorCode.STALE_CONTROLLER_EPOCH: Fence(controller, epoch - 1, broker_epoch(cluster, broker_id)),
        ErrorCode.STALE_BROKER_EPOCH: Fence(controller, epoch, broker_epoch(cluster, broker_id) - 1),
    }


def produce_error(bootstrap: str, topic: str) -> int:
    with wire.Connection(bootstrap) as conn:
        return conn.produce(topic, 0, wire.record_batch([(None, b"after")]), acks=1).error_code


def test_stale_controller_requests_change_nothing(ib_cluster: LocalCluster) -> None:
    """LeaderAndIsr making the receiver the canary's leader, UpdateMetadata leaving it alone in the
    cluster, StopReplica deleting the canary: stale controller or broker epoch, every version."""
    canary_leader = leader(ib_cluster, CANARY)
    before, records = snapshot(ib_cluster), canary_records(ib_cluster)
    for broker_id, process in ib_cluster.brokers.items():
        for code, fence in stale_fences(ib_cluster, broker_id).items():
            requests = {
                ApiKey.LEADER_AND_ISR: leader_and_isr(ib_cluster, fence, CANARY, broker_id),
                ApiKey.UPDATE_METADATA: update_metadata(ib_cluster, fence, CANARY, broker_id),
                ApiKey.STOP_REPLICA: stop_replica(ib_cluster, fence, CANARY),
            }
            for api_key, request in requests.items():
                for version in VERSIONS[api_key]:
                    answer = call(process.bootstrap, api_key, version, request)
                    assert answer.error_code == code, f"{api_key.name} v{version} to broker {broker_id}"
    assert snapshot(ib_cluster) == before
    assert canary_records(ib_cluster) == records
    for broker_id, process in ib_cluster.brokers.items():
        assert (ib_cluster.data_dir / f"broker-{broker_id}" / f"{CANARY}-0").is_dir()
        expected = ErrorCode.NONE if broker_id == canary_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert produce_error(process.bootstrap, CANARY) == expected
    # acks=1: the record is readable once the followers' next fetch moves the high watermark
    eventually(lambda: len(canary_records(ib_cluster)) > len(records), 15, "the record written after")
    after = canary_records(ib_cluster)
    assert after[: len(records)] == records and len(after) == len(records) + 1
    for broker_id in ib_cluster.brokers:  # every follower still replicates
        eventually(
            lambda b=broker_id: canary_copy(ib_cluster, b) == canary_copy(ib_cluster, canary_leader),
            15,
            "copies",
        )
    assert_no_traceback(ib_cluster)


def canary_copy(cluster: LocalCluster, broker_id: int) -> bytes:
    directory = cluster.data_dir / f"broker-{broker_id}" / f"{CANARY}-0"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def test_refused_alter_partition_leaves_zookeeper_unchanged(ib_cluster: LocalCluster) -> None:
    controller = ib_cluster.controller()
    assert controller is not None
    other = non_controller(ib_cluster)
    boss = leader(ib_cluster, TARGET)
    follower = next(b for b in isr(ib_cluster, TARGET) if b != boss)
    epochs = ib_cluster.state(TARGET, 0)["leader_epoch"], partition_epoch(ib_cluster, TARGET)
    epoch = broker_epoch(ib_cluster, boss)
    before = snapshot(ib_cluster)
    cases = [  # (to, asking broker, its epoch, (leader epoch, partition epoch), partition error)
        (controller, boss, epoch - 1, epochs, None),
        (controller, follower, broker_epoch(ib_cluster, follower), epochs, ErrorCode.FENCED_LEADER_EPOCH),
        (controller, boss, epoch, (epochs[0] - 1, epochs[1]), ErrorCode.FENCED_LEADER_EPOCH),
        (controller, boss, epoch, (epochs[0], epochs[1] - 1), ErrorCode.INVALID_UPDATE_VERSION),
    ]
    for version in VERSIONS[ApiKey.ALTER_PARTITION]:
        request = alter_partition(ib_cluster, boss, epoch, TARGET, [boss], epochs)
        answer = call(ib_cluster.brokers[other].bootstrap, ApiKey.ALTER_PARTITION, version, request)
        assert answer.error_code == ErrorCode.NOT_CONTROLLER
        for to, asker, asker_epoch, asked_epochs, partition_error in cases:
            request = alter_partition(ib_cluster, asker, asker_epoch, TARGET, [asker], asked_epochs)
            answer = call(ib_cluster.brokers[to].bootstrap, ApiKey.ALTER_PARTITION, version, request)
            if partition_error is None:
                assert answer.error_code == ErrorCode.STALE_BROKER_EPOCH
            else:
                assert answer.error_code == ErrorCode.NONE
                assert [p.error_code for t in answer.topics for p in t.partitions] == [partition_error]
    assert snapshot(ib_cluster) == before
    assert_no_traceback(ib_cluster)


def test_controlled_shutdown_with_a_stale_broker_epoch_moves_nothing(ib_cluster: LocalCluster) -> None:
    controller = ib_cluster.controller()
    assert controller is not None
    leaders = {leader(ib_cluster, TARGET, p) for p in range(TOPICS[TARGET][0])}
    before = snapshot(ib_cluster)
    for broker_id in ib_cluster.brokers:
        for version in (2, 3):
            request = ControlledShutdownRequest(broker_id, broker_epoch(ib_cluster, broker_id) - 1)
            answer = call(
                ib_cluster.brokers[controller].bootstrap, ApiKey.CONTROLLED_SHUTDOWN, version, request
            )
            assert answer.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert snapshot(ib_cluster) == before
    assert {leader(ib_cluster, TARGET, p) for p in range(TOPICS[TARGET][0])} == leaders
    assert_no_traceback(ib_cluster)


def fetch(bootstrap: str, version: int, request: FetchRequest) -> FetchResponse.PartitionData:
    """The answer for the one partition `request` fetches."""
    (topic,) = call(bootstrap, ApiKey.FETCH, version, request).responses
    (partition,) = topic.partitions
    return partition


def consumer_high_watermark(cluster: LocalCluster, bootstrap: str) -> int:
    """NARROW's high watermark, as a consumer's fetch answers it (a follower fetch answers the one
    before its own fetch position counted, as Kafka's leader does)."""
    return fetch(bootstrap, 12, replica_fetch(cluster, -1, NARROW, 0, 0)).high_watermark


def test_a_follower_fetch_from_a_non_replica_gets_nothing_and_moves_no_high_watermark(
    ib_cluster: LocalCluster,
) -> None:
    boss = leader(ib_cluster, NARROW)
    (follower,) = [b for b in isr(ib_cluster, NARROW) if b != boss]
    (stranger,) = [b for b in ib_cluster.brokers if b not in (boss, follower)]
    bootstrap = ib_cluster.brokers[boss].bootstrap
    ib_cluster.brokers[follower].send_signal(signal.SIGSTOP)
    try:
        assert produce_error(bootstrap, NARROW) == ErrorCode.NONE  # acks=1: beyond the high watermark
        high_watermark = consumer_high_watermark(ib_cluster, bootstrap)
        for version in (12, 15):
            for offset in (high_watermark, high_watermark + 1):
                answer = fetch(bootstrap, version, replica_fetch(ib_cluster, stranger, NARROW, 0, offset))
                assert not answer.records
                assert consumer_high_watermark(ib_cluster, bootstrap) == high_watermark
        fetch(bootstrap, 12, replica_fetch(ib_cluster, follower, NARROW, 0, high_watermark + 1))
        assert consumer_high_watermark(ib_cluster, bootstrap) == high_watermark + 1  # the replica moves it
    finally:
        ib_cluster.brokers[follower].send_signal(signal.SIGCONT)
    assert isr(ib_cluster, NARROW) and stranger not in isr(ib_cluster, NARROW)
    assert_no_traceback(ib_cluster)


def test_a_fetch_with_a_fenced_leader_epoch_is_refused(ib_cluster: LocalCluster) -> None:
    """A follower's death moves the canary's leader epoch on (it leaves the ISR); fetches at the
    old epoch, by a consumer and by the remaining follower, get FENCED_LEADER_EPOCH."""
    boss, old = leader(ib_cluster, CANARY), ib_cluster.state(CANARY, 0)["leader_epoch"]
    victim = next(b for b in isr(ib_cluster, CANARY) if b not in (boss, ib_cluster.controller()))
    (survivor,) = [b for b in ib_cluster.brokers if b not in (boss, victim)]
    records = canary_records(ib_cluster)
    ib_cluster.brokers[victim].kill()
    try:
        eventually(
            lambda: victim not in isr(ib_cluster, CANARY), SESSION_TIMEOUT_MS / 1000 + 10, "ISR shrink"
        )
        new = ib_cluster.state(CANARY, 0)["leader_epoch"]
        assert new > old and leader(ib_cluster, CANARY) == boss
        bootstrap = ib_cluster.brokers[boss].bootstrap
        # ZooKeeper holds the new epoch before the controller's LeaderAndIsr reaches the leader: wait
        # until the leader serves at it (a fetch at an epoch it does not know yet is refused)
        eventually(
            lambda: (
                fetch(bootstrap, 12, replica_fetch(ib_cluster, -1, CANARY, 0, 0, new)).error_code
                == ErrorCode.NONE
            ),
            TIMEOUT_S,
            "the leader at the new leader epoch",
        )
        for replica in (-1, survivor):
            for version in (9, 12, 17):
                fenced = fetch(bootstrap, version, replica_fetch(ib_cluster, replica, CANARY, 0, 0, old))
                assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH and not fenced.records
                current = fetch(bootstrap, version, replica_fetch(ib_cluster, replica, CANARY, 0, 0, new))
                assert current.error_code == ErrorCode.NONE
    finally:
        ib_cluster.brokers[victim].restart()
    for name, (partitions, replication) in TOPICS.items():
        for p in range(partitions):
            eventually(
                lambda n=name, p=p, r=replication: len(isr(ib_cluster, n, p)) == r,
                TIMEOUT_S,
                f"{name}-{p} ISR",
            )
    assert canary_records(ib_cluster) == records
    assert_no_traceback(ib_cluster)
