"""Differential cases of consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete; valid
and edge (stale and unknown member ids, old generations, unknown groups, commits to unknown topics,
inconsistent protocols, offsets of a group with members)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import delete_groups as dg
from odradek.protocol.messages import describe_groups as dsg
from odradek.protocol.messages import find_coordinator as fc
from odradek.protocol.messages import heartbeat as hb
from odradek.protocol.messages import join_group as jg
from odradek.protocol.messages import leave_group as lg
from odradek.protocol.messages import list_groups as lsg
from odradek.protocol.messages import offset_commit as oc
from odradek.protocol.messages import offset_delete as od
from odradek.protocol.messages import offset_fetch as of
from odradek.protocol.messages import sync_group as sg
from tests.differential.build import coordinator, fmt, join, member_of, ready, sync, topic
from tests.differential.engine import Case, Ctx, Step


def member_id(c: Ctx, member: str) -> str:
    return c[member].member_id if member else "unknown-member"


def heartbeat(*, member: str = "joined", version: int = 4, generation: int | None = None) -> Step:
    def request(c: Ctx) -> hb.HeartbeatRequest:
        joined = c[member] if member else None
        return hb.HeartbeatRequest(
            group_id=c.group,
            generation_id=(joined.generation_id if joined else 1) if generation is None else generation,
            member_id=member_id(c, member),
        )

    return Step(ApiKey.HEARTBEAT, version, request)


def leave(*, member: str = "joined", version: int = 5, group: str = "{group}") -> Step:
    def request(c: Ctx) -> lg.LeaveGroupRequest:
        if version >= 3:
            return lg.LeaveGroupRequest(
                group_id=fmt(group, c),
                members=[lg.LeaveGroupRequest.MemberIdentity(member_id=member_id(c, member))],
            )
        return lg.LeaveGroupRequest(group_id=fmt(group, c), member_id=member_id(c, member))

    return Step(ApiKey.LEAVE_GROUP, version, request)


def commit(
    offset: int = 5,
    *,
    name: str = "{topic}",
    partition: int = 0,
    version: int = 8,
    member: str = "",
    generation: int | None = None,
    metadata: str | None = "m",
    compare: bool = True,
) -> Step:
    def request(c: Ctx) -> oc.OffsetCommitRequest:
        joined = c[member] if member else None
        gen = (joined.generation_id if joined else -1) if generation is None else generation
        part = oc.OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata=metadata
        )
        return oc.OffsetCommitRequest(
            group_id=c.group,
            generation_id_or_member_epoch=gen,
            member_id=joined.member_id if joined else ("stale-member" if generation is not None else ""),
            topics=[oc.OffsetCommitRequest.OffsetCommitRequestTopic(name=fmt(name, c), partitions=[part])],
        )

    return Step(ApiKey.OFFSET_COMMIT, version, request, compare=compare)


def fetch_offsets(
    *,
    name: str | None = "{topic}",
    partitions: tuple[int, ...] = (0,),
    version: int = 7,
    group: str = "{group}",
) -> Step:
    def request(c: Ctx) -> of.OffsetFetchRequest:
        topics = (
            None
            if name is None
            else [
                of.OffsetFetchRequest.OffsetFetchRequestTopic(
                    name=fmt(name, c), partition_indexes=list(partitions)
                )
            ]
        )
        if version >= 8:
            wanted = (
                None
                if name is None
                else [
                    of.OffsetFetchRequest.OffsetFetchRequestTopics(
                        name=fmt(name, c), partition_indexes=list(partitions)
                    )
                ]
            )
            return of.OffsetFetchRequest(
                groups=[of.OffsetFetchRequest.OffsetFetchRequestGroup(fmt(group, c), topics=wanted)]
            )
        return of.OffsetFetchRequest(group_id=fmt(group, c), topics=topics)

    return Step(ApiKey.OFFSET_FETCH, version, request)


def describe(*groups: str, version: int = 5) -> Step:
    return Step(
        ApiKey.DESCRIBE_GROUPS,
        version,
        lambda c: dsg.DescribeGroupsRequest(groups=[fmt(g, c) for g in groups or ("{group}",)]),
        ignore=frozenset({"client_id"}),
    )


def list_groups(states: tuple[str, ...] = ("__none__",), version: int = 4) -> Step:
    """ListGroups filtered to a state nobody is in (so that other cases' groups do not show), or all."""
    return Step(
        ApiKey.LIST_GROUPS,
        version,
        lsg.ListGroupsRequest(states_filter=list(states)) if version >= 4 else lsg.ListGroupsRequest(),
    )


def delete_groups(*groups: str, version: int = 2) -> Step:
    return Step(
        ApiKey.DELETE_GROUPS,
        version,
        lambda c: dg.DeleteGroupsRequest(groups_names=[fmt(g, c) for g in groups or ("{group}",)]),
    )


def offset_delete(*, name: str = "{topic}", partition: int = 0) -> Step:
    return Step(
        ApiKey.OFFSET_DELETE,
        0,
        lambda c: od.OffsetDeleteRequest(
            group_id=c.group,
            topics=[
                od.OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=fmt(name, c),
                    partitions=[od.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition)],
                )
            ],
        ),
    )


def with_topic(*steps: Step, partitions: int = 1) -> tuple[Step, ...]:
    return (topic(partitions), ready(partitions=partitions), *steps)


def _group_steps(*steps: Any) -> tuple[Step, ...]:
    out: list[Step] = []
    for step in steps:
        out += list(step) if isinstance(step, tuple) else [step]
    return tuple(out)


CASES: list[Case] = []

# FindCoordinator
for v in range(0, 5):
    CASES.append(Case(f"find-coordinator/v{v}/group", (coordinator(version=v),)))
for v in (1, 4):
    CASES.append(Case(f"find-coordinator/v{v}/transaction", (coordinator("{txn}", key_type=1, version=v),)))
CASES += [
    Case(
        "find-coordinator/bad-key-type",
        (
            Step(
                ApiKey.FIND_COORDINATOR,
                4,
                lambda c: fc.FindCoordinatorRequest(key_type=7, coordinator_keys=[c.group]),
            ),
        ),
    ),
    Case("find-coordinator/empty-group", (coordinator(""),)),
]

# JoinGroup / SyncGroup / Heartbeat / LeaveGroup
for v in (4, 5, 6, 7, 8, 9):
    CASES.append(Case(f"join-group/v{v}/member-id-required", (coordinator(compare=False), join(version=v))))
for v in (0, 1, 2, 3):
    CASES.append(Case(f"join-group/v{v}/first-join", (coordinator(compare=False), join(version=v))))
CASES += [
    Case("join-group/rejoin-with-id", _group_steps(member_of(compare=True))),
    Case(
        "join-group/unknown-member-id",
        (
            coordinator(compare=False),
            join(member="", compare=False, step_name="first"),
            Step(
                ApiKey.JOIN_GROUP,
                7,
                lambda c: jg.JoinGroupRequest(
                    group_id=c.group,
                    session_timeout_ms=30000,
                    rebalance_timeout_ms=30000,
                    member_id="no-such-member",
                    protocol_type="consumer",
                    protocols=[jg.JoinGroupRequest.JoinGroupRequestProtocol("range", b"")],
                ),
            ),
        ),
    ),
    Case("join-group/session-timeout-too-small", (coordinator(compare=False), join(session_timeout_ms=10))),
    Case(
        "join-group/session-timeout-too-big",
        (coordinator(compare=False), join(session_timeout_ms=10_000_000)),
    ),
    Case("join-group/empty-protocol-type", (coordinator(compare=False), join(protocol_type=""))),
    Case("join-group/no-protocols", (coordinator(compare=False), join(protocols=()))),
    Case("join-group/empty-group-id", (coordinator(compare=False), join(group=""))),
    Case(
        "join-group/inconsistent-protocol-type",
        _group_steps(member_of(), join(protocol_type="connect", step_name="other")),
    ),
    Case(
        "join-group/static-member",
        (coordinator(compare=False), join(instance="static-1", step_name="joined")),
    ),
    Case("sync-group/leader-assigns", _group_steps(member_of()[:3], sync())),
    Case("sync-group/stale-generation", _group_steps(member_of()[:3], sync(generation=99))),
    Case(
        "sync-group/unknown-member",
        _group_steps(
            member_of(),
            Step(
                ApiKey.SYNC_GROUP,
                5,
                lambda c: sg.SyncGroupRequest(
                    group_id=c.group,
                    generation_id=1,
                    member_id="no-such-member",
                    protocol_type="consumer",
                    protocol_name="range",
                ),
            ),
        ),
    ),
    Case(
        "sync-group/unknown-group",
        (
            coordinator(compare=False),
            Step(
                ApiKey.SYNC_GROUP,
                5,
                lambda c: sg.SyncGroupRequest(
                    group_id=c.group,
                    generation_id=1,
                    member_id="m",
                    protocol_type="consumer",
                    protocol_name="range",
                ),
            ),
        ),
    ),
    Case("heartbeat/stable-member", _group_steps(member_of(), heartbeat())),
    Case("heartbeat/stale-generation", _group_steps(member_of(), heartbeat(generation=42))),
    Case("heartbeat/unknown-member", _group_steps(member_of(), heartbeat(member=""))),
    Case("heartbeat/unknown-group", (coordinator(compare=False), heartbeat(member=""))),
    Case("heartbeat/v0", _group_steps(member_of(), heartbeat(version=0))),
    Case("heartbeat/during-rebalance", _group_steps(member_of()[:3], heartbeat())),
    Case("leave-group/member", _group_steps(member_of(), leave(), describe())),
    Case("leave-group/v0", _group_steps(member_of(), leave(version=0))),
    Case("leave-group/v2", _group_steps(member_of(), leave(version=2))),
    Case("leave-group/unknown-member", _group_steps(member_of(), leave(member=""))),
    Case("leave-group/unknown-group", (coordinator(compare=False), leave(member=""))),
    Case("leave-group/twice", _group_steps(member_of(), leave(), leave())),
]

# DescribeGroups / ListGroups / DeleteGroups
CASES += [
    Case("describe-groups/stable", _group_steps(member_of(), describe())),
    Case("describe-groups/unknown", (coordinator(compare=False), describe())),
    Case("describe-groups/v0-unknown", (coordinator(compare=False), describe(version=0))),
    Case("describe-groups/empty-after-commit", with_topic(coordinator(compare=False), commit(), describe())),
    Case("describe-groups/completing-rebalance", _group_steps(member_of()[:3], describe())),
    Case("list-groups/no-match", (list_groups(),)),
    Case(
        "describe-groups/after-join-without-protocol-type",
        (coordinator(compare=False), join(protocol_type="", compare=False), describe()),
    ),
    Case(
        "describe-groups/after-join-without-protocols",
        (coordinator(compare=False), join(protocols=(), compare=False), describe()),
    ),
    Case(
        "describe-groups/after-too-large-commit",
        with_topic(coordinator(compare=False), commit(metadata="x" * 5000, compare=False), describe()),
    ),
    Case("delete-groups/unknown", (coordinator(compare=False), delete_groups())),
    Case(
        "delete-groups/empty-group",
        with_topic(coordinator(compare=False), commit(), delete_groups(), fetch_offsets()),
    ),
    Case("delete-groups/non-empty", _group_steps(member_of(), delete_groups())),
    Case("delete-groups/v0", (coordinator(compare=False), delete_groups(version=0))),
]

# OffsetCommit / OffsetFetch / OffsetDelete
for v in (2, 3, 5, 6, 7, 8, 9):
    CASES.append(
        Case(f"offset-commit/v{v}/simple", with_topic(coordinator(compare=False), commit(version=v)))
    )
for v in (1, 3, 5, 6, 7, 8):
    CASES.append(
        Case(
            f"offset-fetch/v{v}/committed",
            with_topic(coordinator(compare=False), commit(compare=False), fetch_offsets(version=v)),
        )
    )
CASES += [
    Case("offset-commit/unknown-topic", (coordinator(compare=False), commit(name="no-{topic}"))),
    Case("offset-commit/unknown-partition", with_topic(coordinator(compare=False), commit(partition=3))),
    Case(
        "offset-commit/null-metadata",
        with_topic(coordinator(compare=False), commit(metadata=None), fetch_offsets()),
    ),
    Case("offset-commit/large-metadata", with_topic(coordinator(compare=False), commit(metadata="x" * 5000))),
    Case(
        "offset-commit/negative-offset", with_topic(coordinator(compare=False), commit(-3), fetch_offsets())
    ),
    Case(
        "offset-commit/stale-member-empty-group", with_topic(coordinator(compare=False), commit(generation=3))
    ),
    Case("offset-commit/member-of-group", with_topic(*member_of(), commit(member="joined"))),
    Case(
        "offset-commit/member-stale-generation",
        with_topic(*member_of(), commit(member="joined", generation=77)),
    ),
    Case("offset-commit/during-rebalance", with_topic(*member_of()[:3], commit(member="joined"))),
    Case("offset-fetch/nothing-committed", with_topic(coordinator(compare=False), fetch_offsets())),
    Case("offset-fetch/unknown-group", (coordinator(compare=False), fetch_offsets())),
    Case("offset-fetch/unknown-topic", (coordinator(compare=False), fetch_offsets(name="no-{topic}"))),
    Case(
        "offset-fetch/all-topics",
        with_topic(coordinator(compare=False), commit(compare=False), fetch_offsets(name=None)),
    ),
    Case(
        "offset-fetch/all-topics-v8",
        with_topic(coordinator(compare=False), commit(compare=False), fetch_offsets(name=None, version=8)),
    ),
    Case(
        "offset-fetch/two-partitions",
        with_topic(
            coordinator(compare=False), commit(compare=False), fetch_offsets(partitions=(0, 1)), partitions=2
        ),
    ),
    Case(
        "offset-delete/empty-group",
        with_topic(coordinator(compare=False), commit(compare=False), offset_delete(), fetch_offsets()),
    ),
    Case("offset-delete/unknown-group", (coordinator(compare=False), offset_delete())),
    Case(
        "offset-delete/subscribed-topic",
        with_topic(*member_of(), commit(member="joined", compare=False), offset_delete()),
    ),
    Case(
        "offset-delete/unknown-topic",
        with_topic(coordinator(compare=False), commit(compare=False), offset_delete(name="no-{topic}")),
    ),
]
