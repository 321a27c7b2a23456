from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNORS,
    Assignment,
    MemberSubscription,
    RangeAssignor,
    TopicDescription,
    UniformAssignor,
    UnsupportedAssignorError,
    assignor_for,
    configured_assignors,
    preferred_assignor,
)

TOPIC_IDS = [uuid.UUID(int=(i + 1) * 0x1000_0000_0000_0001) for i in range(4)]
UNKNOWN_TOPIC = uuid.UUID(int=0xDEAD)
UNIFORM = ASSIGNORS["uniform"]
RANGE = ASSIGNORS["range"]

Members = dict[str, MemberSubscription]
Topics = dict[uuid.UUID, TopicDescription]


def _member(
    member_id: str,
    topics: frozenset[uuid.UUID] | set[uuid.UUID],
    assigned: Mapping[uuid.UUID, frozenset[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSubscription:
    return MemberSubscription(member_id, instance_id, None, frozenset(topics), dict(assigned or {}))


def _holding(members: Members, assignment: Assignment) -> Members:
    """The same members, each holding what `assignment` gave it."""
    return {
        m: _member(m, s.subscribed_topic_ids, assignment.get(m, {}), s.instance_id)
        for m, s in members.items()
    }


def _owners(assignment: Assignment) -> dict[tuple[uuid.UUID, int], str]:
    return {(t, p): m for m, topics in assignment.items() for t, ps in topics.items() for p in ps}


def _moved(before: Assignment, after: Assignment) -> int:
    """Partitions whose owner in `after` is not their owner in `before`."""
    owners = _owners(before)
    return sum(1 for tp, m in _owners(after).items() if owners.get(tp) != m)


def _loads(assignment: Assignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in assignment.items()}


def _check_complete(assignment: Assignment, members: Members, topics: Topics) -> None:
    """Every member named; every partition of a known subscribed topic exactly once, to a subscriber."""
    assert set(assignment) == set(members)
    seen: set[tuple[uuid.UUID, int]] = set()
    for member_id, by_topic in assignment.items():
        for topic_id, partitions in by_topic.items():
            assert partitions, "a topic with no partitions for the member is left out"
            assert topic_id in topics
            assert topic_id in members[member_id].subscribed_topic_ids
            for p in partitions:
                assert 0 <= p < topics[topic_id].partitions
                assert (topic_id, p) not in seen, "assigned twice"
                seen.add((topic_id, p))
    subscribed = {t for s in members.values() for t in s.subscribed_topic_ids if t in topics}
    assert seen == {(t, p) for t in subscribed for p in range(topics[t].partitions)}


@st.composite
def _groups(draw: st.DrawFn, homogeneous: bool = False, with_current: bool = True) -> tuple[Members, Topics]:
    count = draw(st.integers(0, len(TOPIC_IDS)))
    topics = {TOPIC_IDS[i]: TopicDescription(f"topic-{i}", draw(st.integers(0, 12))) for i in range(count)}
    names = [*topics, UNKNOWN_TOPIC]
    subscriptions = st.frozensets(st.sampled_from(names))
    common = draw(subscriptions)
    member_ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), unique=True, max_size=8))
    members = {}
    for index, member_id in enumerate(member_ids):
        current = {}
        if with_current:
            # Anything, including partitions past the end, unsubscribed topics, another's partitions.
            current = draw(
                st.dictionaries(
                    st.sampled_from(names), st.frozensets(st.integers(-1, 14), max_size=6), max_size=3
                )
            )
        instance_id = f"instance-{index}" if draw(st.booleans()) else None
        topics_of_member = common if homogeneous else draw(subscriptions)
        members[member_id] = _member(member_id, topics_of_member, current, instance_id)
    return members, topics


# Every assignor


@pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
@given(group=_groups())
@settings(max_examples=300)
def test_every_subscribed_partition_is_assigned_once_to_a_subscriber(assignor, group) -> None:
    members, topics = group
    _check_complete(assignor.assign(members, topics), members, topics)


@pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
@given(group=_groups())
def test_same_input_same_output_whatever_the_mapping_order(assignor, group) -> None:
    members, topics = group
    first = assignor.assign(members, topics)
    reordered_members = dict(reversed(list(members.items())))
    reordered_topics = dict(reversed(list(topics.items())))
    assert assignor.assign(reordered_members, reordered_topics) == first
    assert assignor.assign(members, topics) == first


@pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
def test_empty_groups_and_topics(assignor) -> None:
    assert assignor.assign({}, {}) == {}
    assert assignor.assign({}, {TOPIC_IDS[0]: TopicDescription("a", 3)}) == {}
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicDescription("a", 0), t1: TopicDescription("b", 2)}
    members = {
        "idle": _member("idle", set()),
        "gone": _member("gone", {UNKNOWN_TOPIC}, {UNKNOWN_TOPIC: frozenset({0})}),
        "empty-topic": _member("empty-topic", {t0}),
    }
    assert assignor.assign(members, topics) == {"idle": {}, "gone": {}, "empty-topic": {}}
    members["reader"] = _member("reader", {t0, t1, UNKNOWN_TOPIC})
    assert assignor.assign(members, topics)["reader"] == {t1: frozenset({0, 1})}


# uniform


@given(group=_groups(homogeneous=True))
@settings(max_examples=300)
def test_uniform_homogeneous_counts_differ_by_at_most_one(group) -> None:
    members, topics = group
    loads = _loads(UNIFORM.assign(members, topics))
    if loads:
        assert max(loads.values()) - min(loads.values()) <= 1


@given(group=_groups())
@settings(max_examples=300)
def test_uniform_no_single_move_would_balance_better(group) -> None:
    """Heterogeneous: no member holding a partition of a topic has two more than another subscriber."""
    members, topics = group
    result = UNIFORM.assign(members, topics)
    loads = _loads(result)
    for topic_id in topics:
        subscribers = [m for m, s in members.items() if topic_id in s.subscribed_topic_ids]
        holders = [m for m in subscribers if result[m].get(topic_id)]
        for holder in holders:
            for other in subscribers:
                assert loads[holder] - loads[other] <= 1, (topic_id, holder, other)


def test_uniform_heterogeneous_balances_within_what_subscriptions_allow() -> None:
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicDescription("a", 12), t1: TopicDescription("b", 2)}
    members = {
        "a": _member("a", {t0}),
        "b": _member("b", {t0, t1}),
        "c": _member("c", {t0, t1}),
    }
    result = UNIFORM.assign(members, topics)
    _check_complete(result, members, topics)
    assert sorted(_loads(result).values()) == [4, 5, 5]
    # Only "b" and "c" may have t1; "a" gets its share of t0.
    members["d"] = _member("d", {t1})
    result = UNIFORM.assign(_holding(members, result), topics)
    _check_complete(result, members, topics)
    assert _loads(result) == {"a": 4, "b": 4, "c": 4, "d": 2}


def _stable_group(count: int, partitions_per_topic: int = 25) -> tuple[Members, Topics, Assignment]:
    topics = {t: TopicDescription(f"topic-{i}", partitions_per_topic) for i, t in enumerate(TOPIC_IDS)}
    members = {f"member-{i:02d}": _member(f"member-{i:02d}", set(topics)) for i in range(count)}
    current = UNIFORM.assign(members, topics)
    return _holding(members, current), topics, current


def test_uniform_keeps_a_stable_assignment() -> None:
    members, topics, current = _stable_group(10)
    assert UNIFORM.assign(members, topics) == current
    # Already balanced current assignments that the assignor did not make are kept too.
    t0 = TOPIC_IDS[0]
    topics = {t0: TopicDescription("a", 5)}
    odd = {
        "x": _member("x", {t0}, {t0: frozenset({0, 3, 4})}),
        "y": _member("y", {t0}, {t0: frozenset({1, 2})}),
    }
    assert UNIFORM.assign(odd, topics) == {"x": {t0: frozenset({0, 3, 4})}, "y": {t0: frozenset({1, 2})}}


def test_uniform_member_joining_ten_over_hundred_moves_only_its_share() -> None:
    members, topics, current = _stable_group(10)
    members["member-99"] = _member("member-99", set(topics))
    result = UNIFORM.assign(members, topics)
    _check_complete(result, members, topics)
    moved = _moved(current, result)
    assert moved == sum(len(ps) for ps in result["member-99"].values())
    assert moved == 9  # 100 // 11; the ten others keep 9 or 10 of their 10
    assert sorted(_loads(result).values()) == [9] * 10 + [10]


def test_uniform_member_leaving_moves_only_its_own_partitions() -> None:
    members, topics, current = _stable_group(10)
    del members["member-03"]
    result = UNIFORM.assign(members, topics)
    _check_complete(result, members, topics)
    owners_before = _owners(current)
    for (topic_id, p), owner in _owners(result).items():
        if owners_before[(topic_id, p)] != "member-03":
            assert owner == owners_before[(topic_id, p)]
    assert _moved(current, result) == 10


def test_uniform_heterogeneous_join_and_leave_keep_most_partitions_in_place() -> None:
    """Five members read t0 (60 partitions), five read t0 and t1 (40): ten each. Balance may move a
    few partitions between the others, but each keeps at least 8 of its 10."""
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicDescription("a", 60), t1: TopicDescription("b", 40)}
    members = {f"m{i}": _member(f"m{i}", {t0} if i < 5 else {t0, t1}) for i in range(10)}
    current = UNIFORM.assign(members, topics)
    assert set(_loads(current).values()) == {10}
    members = _holding(members, current)

    def kept(result: Assignment, member_id: str) -> int:
        return sum(len(ps & current[member_id].get(t, frozenset())) for t, ps in result[member_id].items())

    joined = dict(members, new=_member("new", {t1}))
    result = UNIFORM.assign(joined, topics)
    _check_complete(result, joined, topics)
    assert 8 <= _loads(result)["new"] <= 9
    assert _moved(current, result) <= 12
    assert all(kept(result, m) >= 8 for m in members)
    for leaver in ("m2", "m7"):
        left = {m: s for m, s in members.items() if m != leaver}
        result = UNIFORM.assign(left, topics)
        _check_complete(result, left, topics)
        assert _moved(current, result) <= 13
        assert all(kept(result, m) >= 9 for m in left)


def test_uniform_revokes_unsubscribed_and_missing_partitions() -> None:
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicDescription("a", 2), t1: TopicDescription("b", 2)}
    members = {
        "x": _member("x", {t0}, {t0: frozenset({0, 7}), t1: frozenset({0}), UNKNOWN_TOPIC: frozenset({0})}),
        "y": _member("y", {t0}, {t0: frozenset({0})}),  # x claims p0 first (member id order)
    }
    assert UNIFORM.assign(members, topics) == {"x": {t0: frozenset({0})}, "y": {t0: frozenset({1})}}


@given(group=_groups(homogeneous=True))
@settings(max_examples=300)
def test_uniform_homogeneous_moves_the_fewest_partitions_balance_allows(group) -> None:
    """From any current assignment: each member keeps its valid partitions up to its quota, and the
    extra quotas go to members holding more than the minimum."""
    members, topics = group
    if not members:
        return
    claimed: dict[tuple[uuid.UUID, int], str] = {}
    for member_id in sorted(members):  # a partition held twice stays with the first by member id
        subscription = members[member_id]
        for topic_id, partitions in subscription.assigned.items():
            if topic_id in topics and topic_id in subscription.subscribed_topic_ids:
                for p in partitions:
                    if 0 <= p < topics[topic_id].partitions:
                        claimed.setdefault((topic_id, p), member_id)
    kept = [sum(1 for m in claimed.values() if m == member_id) for member_id in members]
    subscribed = next(iter(members.values())).subscribed_topic_ids
    total = sum(t.partitions for topic_id, t in topics.items() if topic_id in subscribed)
    minimum, extra = divmod(total, len(members))
    fewest = total - sum(min(k, minimum) for k in kept) - min(extra, sum(1 for k in kept if k > minimum))
    result = UNIFORM.assign(members, topics)
    assert sum(1 for tp, m in _owners(result).items() if claimed.get(tp) != m) == fewest


def test_uniform_extra_quota_goes_to_the_member_already_holding_it() -> None:
    t0 = TOPIC_IDS[0]
    topics = {t0: TopicDescription("a", 3)}
    members = {
        "a": _member("a", {t0}, {t0: frozenset({2})}),
        "b": _member("b", {t0}, {t0: frozenset({0, 1})}),
    }
    assert UNIFORM.assign(members, topics) == {"a": {t0: frozenset({2})}, "b": {t0: frozenset({0, 1})}}


@given(group=_groups(homogeneous=True, with_current=False), joiner=st.text("pq", min_size=4, max_size=4))
@settings(max_examples=200)
def test_uniform_homogeneous_join_moves_only_what_the_new_member_gets(group, joiner) -> None:
    members, topics = group
    current = UNIFORM.assign(members, topics)
    members = _holding(members, current)
    subscribed = next(iter(members.values())).subscribed_topic_ids if members else frozenset(topics)
    members[joiner] = _member(joiner, subscribed)
    result = UNIFORM.assign(members, topics)
    total = sum(len(ps) for ps in result[joiner].values())
    assert _moved(current, result) == total
    assert total <= math.ceil(sum(len(ps) for m in result.values() for ps in m.values()) / len(members))


@given(group=_groups(homogeneous=True, with_current=False), data=st.data())
@settings(max_examples=200)
def test_uniform_homogeneous_leave_moves_only_the_leavers_partitions(group, data) -> None:
    members, topics = group
    if len(members) < 2:
        return  # the last member leaving leaves nobody to move its partitions to
    current = UNIFORM.assign(members, topics)
    members = _holding(members, current)
    leaver = data.draw(st.sampled_from(sorted(members)))
    del members[leaver]
    result = UNIFORM.assign(members, topics)
    assert _moved(current, result) == sum(len(ps) for ps in current[leaver].values())


@given(group=_groups(with_current=False))
@settings(max_examples=200)
def test_uniform_recomputing_its_own_assignment_moves_nothing(group) -> None:
    members, topics = group
    current = UNIFORM.assign(members, topics)
    assert UNIFORM.assign(_holding(members, current), topics) == current


# range


def test_range_kafka_example_two_members_two_topics_of_three() -> None:
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicDescription("t0", 3), t1: TopicDescription("t1", 3)}
    members = {m: _member(m, {t0, t1}) for m in ("M1", "M0")}
    assert RANGE.assign(members, topics) == {
        "M0": {t0: frozenset({0, 1}), t1: frozenset({0, 1})},
        "M1": {t0: frozenset({2}), t1: frozenset({2})},
    }


@given(group=_groups())
@settings(max_examples=300)
def test_range_contiguous_ranges_in_member_order_co_partitioned(group) -> None:
    members, topics = group
    result = RANGE.assign(members, topics)
    order = sorted(
        members.values(), key=lambda s: (s.instance_id is None, s.instance_id or s.member_id, s.member_id)
    )
    for topic_id in topics:
        subscribers = [s.member_id for s in order if topic_id in s.subscribed_topic_ids]
        expected_start = 0
        sizes = []
        for member_id in subscribers:
            partitions = sorted(result[member_id].get(topic_id, ()))
            assert partitions == list(range(expected_start, expected_start + len(partitions)))
            expected_start += len(partitions)
            sizes.append(len(partitions))
        if subscribers:
            assert sizes == sorted(sizes, reverse=True)
            assert max(sizes) - min(sizes) <= 1
    # Co-partitioning: same partition count and same subscribers, same partitions per member.
    for a in topics:
        for b in topics:
            subscribers_a = {m for m, s in members.items() if a in s.subscribed_topic_ids}
            subscribers_b = {m for m, s in members.items() if b in s.subscribed_topic_ids}
            if topics[a].partitions == topics[b].partitions and subscribers_a == subscribers_b:
                for member_id in subscribers_a:
                    assert result[member_id].get(a) == result[member_id].get(b)


def test_range_static_members_first_and_keep_their_ranges_across_restarts() -> None:
    t0 = TOPIC_IDS[0]
    topics = {t0: TopicDescription("a", 6)}
    members = {
        "a-dynamic": _member("a-dynamic", {t0}),
        "z-static": _member("z-static", {t0}, instance_id="instance-1"),
        "b-static": _member("b-static", {t0}, instance_id="instance-2"),
    }
    assert RANGE.assign(members, topics) == {
        "z-static": {t0: frozenset({0, 1})},
        "b-static": {t0: frozenset({2, 3})},
        "a-dynamic": {t0: frozenset({4, 5})},
    }
    # instance-1 restarts under a new member id that sorts last: same range.
    del members["z-static"]
    members["zz-new"] = _member("zz-new", {t0}, instance_id="instance-1")
    assert RANGE.assign(members, topics)["zz-new"] == {t0: frozenset({0, 1})}


@given(group=_groups())
def test_range_is_recomputed_from_the_member_order_not_the_current_assignment(group) -> None:
    members, topics = group
    holding_nothing = {m: _member(m, s.subscribed_topic_ids, {}, s.instance_id) for m, s in members.items()}
    assert RANGE.assign(members, topics) == RANGE.assign(holding_nothing, topics)


# Choosing the assignor


def test_builtin_assignors_and_default_setting() -> None:
    assert DEFAULT_ASSIGNORS == ("uniform", "range")
    assert set(ASSIGNORS) == {"uniform", "range"}
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor) and ASSIGNORS["uniform"].name == "uniform"
    assert isinstance(ASSIGNORS["range"], RangeAssignor) and ASSIGNORS["range"].name == "range"


def test_assignor_for_a_member_request() -> None:
    assert assignor_for(DEFAULT_ASSIGNORS, None) is UNIFORM
    assert assignor_for(DEFAULT_ASSIGNORS, "range") is RANGE
    assert assignor_for(["range", "uniform"], None) is RANGE
    assert assignor_for(["range"], "range") is RANGE
    with pytest.raises(UnsupportedAssignorError):
        assignor_for(["range"], "uniform")
    with pytest.raises(UnsupportedAssignorError):
        assignor_for(DEFAULT_ASSIGNORS, "cooperative-sticky")
    with pytest.raises(UnsupportedAssignorError):
        assignor_for(DEFAULT_ASSIGNORS, "")


def test_configured_assignors_take_names_or_kafka_class_names() -> None:
    assert configured_assignors(
        [
            " org.apache.kafka.coordinator.group.assignor.RangeAssignor",
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
            "range",
        ]
    ) == (RANGE, UNIFORM)
    with pytest.raises(ValueError, match="unknown assignor"):
        configured_assignors(["uniform", "com.example.MyAssignor"])
    with pytest.raises(ValueError, match="no assignor"):
        configured_assignors([])


def test_preferred_assignor_is_the_one_most_members_ask_for() -> None:
    assert preferred_assignor(DEFAULT_ASSIGNORS, []) is UNIFORM
    assert preferred_assignor(DEFAULT_ASSIGNORS, [None, None]) is UNIFORM
    assert preferred_assignor(["range", "uniform"], [None]) is RANGE
    assert preferred_assignor(DEFAULT_ASSIGNORS, [None, "range"]) is RANGE
    assert preferred_assignor(DEFAULT_ASSIGNORS, ["range", "uniform", "range"]) is RANGE
    assert preferred_assignor(DEFAULT_ASSIGNORS, ["uniform", "range", "uniform", None, None]) is UNIFORM
    # A tie goes to the one configured first.
    assert preferred_assignor(DEFAULT_ASSIGNORS, ["range", "uniform"]) is UNIFORM
    assert preferred_assignor(["range", "uniform"], ["uniform", "range"]) is RANGE
