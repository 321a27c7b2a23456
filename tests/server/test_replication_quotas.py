"""Replication throttles (KIP-73): which partitions a topic's throttled replica list names for this
broker, and when the rate of recorded bytes exceeds the quota."""

from __future__ import annotations

from odradek.replication.quotas import UNLIMITED, WINDOW_S, WINDOWS, ReplicationQuota


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_throttled_replicas_name_this_broker_or_every_partition() -> None:
    quota = ReplicationQuota(2)
    quota.set_throttled_replicas("t", "0:1,0:2, 1:3 ,2:2,bad")
    assert [quota.is_throttled("t", p) for p in range(3)] == [True, False, True]
    quota.set_throttled_replicas("u", "*")
    assert quota.is_throttled("u", 7) and not quota.is_throttled("v", 0)
    quota.set_throttled_replicas("t", "")
    assert not quota.is_throttled("t", 0)


def test_the_quota_is_exceeded_while_the_recent_rate_is_above_it() -> None:
    clock = Clock()
    quota = ReplicationQuota(1, clock)
    quota.record(10**9)
    assert not quota.exceeded()  # unlimited by default: nothing recorded
    quota.rate = 1000
    quota.record(WINDOW_S * (WINDOWS - 1) * 1000)  # exactly the rate over the shortest span
    assert not quota.exceeded()
    quota.record(1)
    assert quota.exceeded()
    clock.now += WINDOW_S * WINDOWS + 0.1  # the samples aged out
    assert not quota.exceeded()
    quota.rate = UNLIMITED
    quota.record(10**9)
    assert not quota.exceeded()
