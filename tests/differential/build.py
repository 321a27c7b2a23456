"""Builders of the differential suite's steps: short functions returning `Step`s for the requests the
case tables use most, so that a case reads as its sequence (create a topic, produce, fetch ...).

Names in a builder's arguments are templates formatted with the case's Ctx: "{topic}", "{topic2}",
"{group}", "{txn}" (each unique to the case), so "{topic}" is the case's own topic and "no-{topic}"
one that does not exist. A producer id or epoch given as a string names an earlier step whose
InitProducerId answer holds it ("init", "init.epoch+1" ...). Record batches carry a fixed timestamp,
so the bytes Kafka and odradek store and return are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import create_topics as ct
from odradek.protocol.messages import fetch as fe
from odradek.protocol.messages import find_coordinator as fc
from odradek.protocol.messages import init_producer_id as ip
from odradek.protocol.messages import join_group as jg
from odradek.protocol.messages import list_offsets as lo
from odradek.protocol.messages import metadata as md
from odradek.protocol.messages import produce as pr
from odradek.protocol.messages import sync_group as sg
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from tests.differential.engine import Ctx, Step

TIMESTAMP = 1_700_000_000_000
NO_LEADER = frozenset({5, 3, 6})  # LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER
CONSUMER_METADATA = b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00"  # v1 subscription, no topics


def fmt(text: str, c: Ctx) -> str:
    return text.format(topic=c.topic, topic2=c.topic2, group=c.group, txn=c.txn)


def producer_field(value: int | str, c: Ctx, field: str) -> int:
    """An int as is; "init" the field of the saved InitProducerId answer "init"; "init+1" that plus 1."""
    if isinstance(value, int):
        return value
    name, _, delta = value.partition("+")
    base = getattr(c[name], field)
    return base + int(delta or 0)


def records(
    count: int = 1,
    *,
    size: int = 0,
    key: bytes | None = b"k",
    pid: int | str = -1,
    epoch: int | str = -1,
    seq: int = -1,
    txn: bool = False,
    timestamp: int = TIMESTAMP,
    compression: CompressionType = CompressionType.NONE,
) -> Callable[[Ctx], bytes]:
    """A record batch (as a function of the Ctx, for producer ids saved by earlier steps)."""

    def make(c: Ctx) -> bytes:
        value = (b"v" * size) if size else None
        batch = [
            SimpleRecord(value if value is not None else f"v{i}".encode(), key, timestamp=timestamp)
            for i in range(count)
        ]
        return build_batch(
            batch,
            compression,
            producer_id=producer_field(pid, c, "producer_id"),
            producer_epoch=producer_field(epoch, c, "producer_epoch"),
            base_sequence=seq,
            is_transactional=txn,
        )

    return make


def create(
    *topics: tuple[str, int, int] | tuple[str, int, int, dict[str, str]],
    version: int = 7,
    validate_only: bool = False,
    compare: bool = True,
    ignore: frozenset[str] = frozenset(),
) -> Step:
    """CreateTopics of (name, partitions, replication factor[, configs])."""

    def request(c: Ctx) -> ct.CreateTopicsRequest:
        made = []
        for spec in topics:
            configs = spec[3] if len(spec) > 3 else {}  # type: ignore[misc]
            made.append(
                ct.CreateTopicsRequest.CreatableTopic(
                    name=fmt(spec[0], c),
                    num_partitions=spec[1],
                    replication_factor=spec[2],
                    configs=[ct.CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in configs.items()],
                )
            )
        return ct.CreateTopicsRequest(topics=made, timeout_ms=30000, validate_only=validate_only)

    return Step(ApiKey.CREATE_TOPICS, version, request, compare=compare, ignore=ignore)


def topic(partitions: int = 1, name: str = "{topic}", configs: dict[str, str] | None = None) -> Step:
    """Setup: the case's topic created, not compared (its leaders known before the next step)."""
    return create((name, partitions, 1, configs or {}), compare=False)


def ready(name: str = "{topic}", partitions: int = 1) -> Step:
    """Setup: Metadata until every partition of `name` has a leader."""

    def led(answer: Any) -> bool:
        return all(
            t.error_code == 0
            and len(t.partitions) == partitions
            and all(p.leader_id >= 0 for p in t.partitions)
            for t in answer.topics
        )

    return Step(
        ApiKey.METADATA,
        12,
        lambda c: md.MetadataRequest(
            topics=[md.MetadataRequest.MetadataRequestTopic(name=fmt(name, c))],
            allow_auto_topic_creation=False,
        ),
        compare=False,
        until=led,
    )


def metadata(
    *names: str,
    version: int = 12,
    auto: bool = False,
    all_topics: bool = False,
    operations: bool = False,
    ignore: frozenset[str] = frozenset(),
) -> Step:
    def request(c: Ctx) -> md.MetadataRequest:
        topics = (
            None if all_topics else [md.MetadataRequest.MetadataRequestTopic(name=fmt(n, c)) for n in names]
        )
        return md.MetadataRequest(
            topics=topics,
            allow_auto_topic_creation=auto,
            include_cluster_authorized_operations=operations and version <= 10,
            include_topic_authorized_operations=operations,
        )

    return Step(ApiKey.METADATA, version, request, ignore=ignore)


def produce(
    batch: Callable[[Ctx], bytes] | bytes | None = None,
    *,
    name: str = "{topic}",
    partition: int = 0,
    version: int = 9,
    acks: int = -1,
    transactional_id: str | None = None,
    compare: bool = True,
    step_name: str = "",
) -> Step:
    def request(c: Ctx) -> pr.ProduceRequest:
        body = records()(c) if batch is None else batch(c) if callable(batch) else batch
        data = pr.ProduceRequest.PartitionProduceData(index=partition, records=body)
        return pr.ProduceRequest(
            transactional_id=None if transactional_id is None else fmt(transactional_id, c),
            acks=acks,
            timeout_ms=10000,
            topic_data=[pr.ProduceRequest.TopicProduceData(name=fmt(name, c), partition_data=[data])],
        )

    return Step(ApiKey.PRODUCE, version, request, compare=compare, name=step_name)


def fetch(
    offset: int = 0,
    *,
    name: str = "{topic}",
    partition: int = 0,
    version: int = 12,
    max_bytes: int = 1 << 20,
    isolation: int = 0,
    current_leader_epoch: int = -1,
    ignore: frozenset[str] = frozenset(),
) -> Step:
    def request(c: Ctx) -> fe.FetchRequest:
        part = fe.FetchRequest.FetchPartition(
            partition=partition,
            fetch_offset=offset,
            partition_max_bytes=max_bytes,
            current_leader_epoch=current_leader_epoch,
        )
        return fe.FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=max_bytes,
            isolation_level=isolation,
            topics=[fe.FetchRequest.FetchTopic(topic=fmt(name, c), partitions=[part])],
        )

    return Step(ApiKey.FETCH, version, request, ignore=ignore)


def list_offsets(
    timestamp: int, *, name: str = "{topic}", partition: int = 0, version: int = 7, isolation: int = 0
) -> Step:
    def request(c: Ctx) -> lo.ListOffsetsRequest:
        part = lo.ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
        return lo.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation,
            topics=[lo.ListOffsetsRequest.ListOffsetsTopic(name=fmt(name, c), partitions=[part])],
        )

    return Step(ApiKey.LIST_OFFSETS, version, request)


def coordinator(key: str = "{group}", key_type: int = 0, version: int = 4, compare: bool = True) -> Step:
    """FindCoordinator, retried while the coordinator is not available."""
    return Step(
        ApiKey.FIND_COORDINATOR,
        version,
        lambda c: fc.FindCoordinatorRequest(
            key=fmt(key, c), key_type=key_type, coordinator_keys=[fmt(key, c)]
        ),
        compare=compare,
        retry_on=frozenset({15}),
    )


def init_producer(
    txn: str | None = None,
    *,
    version: int = 4,
    timeout_ms: int = 60000,
    step_name: str = "init",
    compare: bool = True,
    producer_id: int | str = -1,
    producer_epoch: int | str = -1,
) -> Step:
    return Step(
        ApiKey.INIT_PRODUCER_ID,
        version,
        lambda c: ip.InitProducerIdRequest(
            transactional_id=None if txn is None else fmt(txn, c),
            transaction_timeout_ms=timeout_ms,
            producer_id=producer_field(producer_id, c, "producer_id"),
            producer_epoch=producer_field(producer_epoch, c, "producer_epoch"),
        ),
        name=step_name,
        compare=compare,
        retry_on=frozenset(
            {14, 15, 51}
        ),  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, CONCURRENT_TRANSACTIONS
    )


def join(
    *,
    group: str = "{group}",
    member: str = "",
    version: int = 7,
    step_name: str = "join",
    compare: bool = True,
    protocol_type: str = "consumer",
    protocols: Sequence[str] = ("range",),
    session_timeout_ms: int = 30000,
    instance: str | None = None,
) -> Step:
    """JoinGroup; `member` "" for a new member, or the name of a saved JoinGroup answer to rejoin as."""

    def request(c: Ctx) -> jg.JoinGroupRequest:
        member_id = c[member].member_id if member else ""
        return jg.JoinGroupRequest(
            group_id=fmt(group, c),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=30000,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=[jg.JoinGroupRequest.JoinGroupRequestProtocol(p, CONSUMER_METADATA) for p in protocols],
        )

    return Step(ApiKey.JOIN_GROUP, version, request, name=step_name, compare=compare)


def sync(
    *,
    member: str = "joined",
    group: str = "{group}",
    version: int = 5,
    compare: bool = True,
    generation: int | None = None,
) -> Step:
    """SyncGroup as the member of the saved JoinGroup answer `member`, assigning itself nothing."""

    def request(c: Ctx) -> sg.SyncGroupRequest:
        joined = c[member]
        mine = sg.SyncGroupRequest.SyncGroupRequestAssignment(joined.member_id, b"")
        return sg.SyncGroupRequest(
            group_id=fmt(group, c),
            generation_id=joined.generation_id if generation is None else generation,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name=joined.protocol_name,
            assignments=[mine] if joined.leader == joined.member_id else [],
        )

    return Step(ApiKey.SYNC_GROUP, version, request, compare=compare)


def member_of(
    *, group: str = "{group}", version: int = 7, instance: str | None = None, compare: bool = False
) -> tuple[Step, ...]:
    """Setup: a member joined (MEMBER_ID_REQUIRED, then again with its id: answer "joined") and synced."""
    return (
        coordinator(group, compare=False),
        join(group=group, version=version, step_name="first", compare=False, instance=instance),
        join(
            group=group,
            version=version,
            member="first",
            step_name="joined",
            compare=compare,
            instance=instance,
        ),
        sync(group=group, compare=False),
    )
