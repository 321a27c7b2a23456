"""The quota accounting itself (server/client_quotas.py), without a broker: the seeds' eight-level
precedence and the groups it names, Kafka's windowed rate and throttle time, the fetch cap, the
controller mutation token bucket, idle groups forgotten after their window, and the request-path
timer that counts only a handler's own steps."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from odradek.controller.store import CLIENT_ID, USER
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import RequestHeader
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.client_quotas import (
    ClientQuotaManager,
    ClientQuotas,
    ControllerMutationQuotaManager,
    HandlingTimer,
    QuotaWindow,
    limits_of,
    quota_entity,
    quota_entity_for,
    quota_value,
)

WINDOW = QuotaWindow(samples=11, size_ms=1000)

# one limit per level, each a different number: which level answered is the limit
LEVELS = {
    ((USER, "u"), (CLIENT_ID, "c")): 1.0,
    ((USER, "u"), (CLIENT_ID, None)): 2.0,
    ((USER, "u"),): 3.0,
    ((USER, None), (CLIENT_ID, "c")): 4.0,
    ((USER, None), (CLIENT_ID, None)): 5.0,
    ((USER, None),): 6.0,
    ((CLIENT_ID, "c"),): 7.0,
    ((CLIENT_ID, None),): 8.0,
}


def test_the_eight_levels_apply_in_the_seeds_order_and_name_their_groups():
    limits = dict(LEVELS)
    expected = [
        ("u", "c", 1.0),
        ("u", "c", 2.0),  # user + default client id: a group per client id
        ("u", "", 3.0),  # user: all its client ids share
        ("u", "c", 4.0),
        ("u", "c", 5.0),
        ("u", "", 6.0),
        ("", "c", 7.0),  # client id: all users share
        ("", "c", 8.0),
    ]
    for entity, want in zip(list(LEVELS), expected, strict=True):
        assert quota_entity_for(limits, "u", "c") == want
        del limits[entity]
    assert quota_entity_for(limits, "u", "c") is None
    assert quota_entity_for({((CLIENT_ID, None),): 9.0}, "ANONYMOUS", "other") == ("", "other", 9.0)


def test_limits_come_from_the_store_names_and_keep_other_keys_out():
    entities = {
        ("users", "alice/clients/<default>"): {"producer_byte_rate": "1024", "SCRAM-SHA-256": "x"},
        ("clients", "a%2Fb"): {"consumer_byte_rate": "5"},
    }
    assert limits_of(entities, "producer_byte_rate") == {((USER, "alice"), (CLIENT_ID, None)): 1024.0}
    assert limits_of(entities, "consumer_byte_rate") == {((CLIENT_ID, "a/b"),): 5.0}


def test_a_group_over_its_rate_is_throttled_back_to_it():
    manager = ClientQuotaManager("producer_byte_rate", WINDOW)
    manager.set_limits({((CLIENT_ID, "c"),): 1000.0})
    # 10 s (num - 1 windows) at the limit is allowed
    for second in range(10):
        assert manager.record("ANONYMOUS", "c", 1000, second * 1000.0) == 0
    # then 5000 bytes more at 9.5 s: 15000 bytes over a window of 10.5 s (never shorter than
    # num - 1 windows); 15000 bytes take 15 s at the limit: 4.5 s to wait
    assert manager.record("ANONYMOUS", "c", 5000, 9500.0) == 4500
    assert manager.throttle_ms("ANONYMOUS", "c", 9500.0) == 4500
    # another client id has no quota and no group
    assert manager.record("ANONYMOUS", "d", 1 << 30, 9500.0) == 0
    assert [(g.user, g.client_id) for g in manager.groups()] == [("", "c")]


def test_a_new_limit_applies_to_a_running_group():
    manager = ClientQuotaManager("producer_byte_rate", WINDOW)
    manager.set_limits({((CLIENT_ID, None),): 100.0})
    assert manager.record("u", "c", 2000, 0.0) > 0
    manager.set_limits({((CLIENT_ID, None),): 1e9})
    assert manager.record("u", "c", 1, 1.0) == 0


def test_the_fetch_cap_is_the_quota_over_num_minus_one_windows():
    manager = ClientQuotaManager("consumer_byte_rate", QuotaWindow(samples=5, size_ms=2000))
    assert manager.max_value_in_window("u", "c", 0.0) is None
    manager.set_limits({((USER, "u"),): 1000.0})
    assert manager.max_value_in_window("u", "c", 0.0) == 1000.0 * 4 * 2


def test_idle_groups_are_forgotten_after_their_window():
    manager = ClientQuotaManager("producer_byte_rate", WINDOW)
    manager.set_limits({((CLIENT_ID, None),): 1e6})
    for i in range(10_000):
        manager.record("ANONYMOUS", f"client-{i}", 100, 0.0)
    assert len(list(manager.groups())) == 10_000
    manager.record("ANONYMOUS", "late", 100, WINDOW.total_ms + 1.0)
    assert [g.client_id for g in manager.groups()] == ["late"]
    assert len(manager._resolved) == 1


def test_the_request_quota_throttle_is_bounded_by_one_window():
    manager = ClientQuotaManager("request_percentage", WINDOW, max_throttle_ms=WINDOW.size_ms)
    manager.set_limits({((CLIENT_ID, "c"),): 1.0})
    assert manager.record("u", "c", 500.0, 0.0) == 1000


def test_controller_mutations_take_from_a_token_bucket():
    manager = ControllerMutationQuotaManager(WINDOW)
    manager.set_limits({((CLIENT_ID, "c"),): 2.0})  # a burst of 2 x 11 s = 22 partitions
    strict = manager.quota_for("u", "c", True, 0.0)
    strict.record(20)
    strict.record(10)  # the bucket had tokens: accepted, now 8 below zero
    assert strict.throttle_time_ms == 4000
    with pytest.raises(KafkaError) as refused:
        manager.quota_for("u", "c", True, 1000.0).record(1)
    assert refused.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    permissive = manager.quota_for("u", "c", False, 1000.0)
    permissive.record(1)  # older versions: accepted, throttled
    assert permissive.throttle_time_ms == 3500
    assert manager.quota_for("u", "c", True, 5000.0).record(1) is None  # refilled


@pytest.mark.parametrize(
    "components,error",
    [
        ([("user", "a"), ("user", "b")], "Duplicate"),
        ([("ip", "1.2.3.4")], "ip"),
        ([("group", "g")], "Unknown"),
        ([("client-id", "")], "Empty"),
        ([], "Empty"),
    ],
)
def test_bad_entities_are_invalid_requests(components, error):
    with pytest.raises(KafkaError) as refused:
        quota_entity(components)
    assert refused.value.code == ErrorCode.INVALID_REQUEST and error in refused.value.message


def test_quota_values_are_stored_as_kafka_types():
    assert quota_entity([("client-id", "c"), ("user", None)]) == ((USER, None), (CLIENT_ID, "c"))
    assert quota_value("producer_byte_rate", 1048576.0) == "1048576"
    assert quota_value("request_percentage", 50.0) == "50.0"
    for key, value in (("producer_byte_rate", 1.5), ("consumer_byte_rate", 0.0), ("nope", 1.0)):
        with pytest.raises(KafkaError):
            quota_value(key, value)


def test_the_handling_timer_counts_the_handlers_steps_not_its_waits():
    async def handler() -> str:
        sum(range(200_000))
        await asyncio.sleep(0.3)
        return "done"

    async def timed() -> tuple[str, int]:
        timer = HandlingTimer(handler())
        return await timer, timer.elapsed_ns

    result, elapsed_ns = asyncio.run(timed())
    assert result == "done" and 0 < elapsed_ns < 200_000_000


def test_the_user_is_the_connections_principal_and_its_quota_overrides_a_client_id_default():
    """What the SASL test of a user quota needs of the quotas: the principal a connection carries
    (User:ANONYMOUS without authentication) picks the user levels."""
    quotas = ClientQuotas(WINDOW)
    quotas.produce.set_limits({((USER, "alice"),): 1e9, ((CLIENT_ID, None),): 1000.0})
    header = RequestHeader(ApiKey.PRODUCE, 9, 1, "app")
    alice = SimpleNamespace(principal=KafkaPrincipal("User", "alice"), header=header)
    anonymous = SimpleNamespace(principal=ANONYMOUS, header=header)
    assert quotas.record_request(alice, 1 << 20, 0) == 0  # alice's own quota, not the default
    assert quotas.record_request(anonymous, 1 << 20, 0) > 0  # the client-id default
    assert sorted((g.user, g.client_id) for g in quotas.produce.groups()) == [("", "app"), ("alice", "")]


def test_the_rate_keeps_one_sample_more_than_the_window_as_kafkas():
    # Kafka's SampledStat keeps quota.window.num + 1 samples: the twelfth sample of an 11-sample
    # window does not take the first one's place while that one's last record is in the window
    manager = ClientQuotaManager("producer_byte_rate", WINDOW)
    manager.set_limits({((CLIENT_ID, "c"),): 1000.0})
    manager.record("u", "c", 1000, 0.0)
    manager.record("u", "c", 1000, 900.0)  # sample 0: began at 0, last record at 0.9 s
    for second in range(1, 11):  # samples 1-10
        manager.record("u", "c", 1000, second * 1000.0)
    # sample 11 at 11 s: 13,000 bytes since 0 s, 11 s: 13,000 bytes take 13 s at the limit
    assert manager.record("u", "c", 1000, 11_000.0) == 2000


def test_a_sample_counts_until_its_last_record_is_a_window_old():
    # Kafka's purgeObsoleteSamples: a sample that began before the window but was recorded into
    # within it still counts, and the rate is over the time since it began
    manager = ClientQuotaManager("producer_byte_rate", QuotaWindow(samples=2, size_ms=1000))
    manager.set_limits({((CLIENT_ID, "c"),): 50.0})
    manager.record("u", "c", 100, 0.0)
    manager.record("u", "c", 100, 999.0)
    # at 2.5 s: 200 bytes over 2.5 s is 80 B/s; at 50 B/s they take 4 s: 1.5 s to wait
    assert manager.throttle_ms("u", "c", 2500.0) == 1500
    # until the last record (0.999 s) is the whole window (2 s) old: 4 s - 2.998 s to wait
    assert manager.throttle_ms("u", "c", 2998.0) == 1002
    assert manager.throttle_ms("u", "c", 2999.0) == 0
