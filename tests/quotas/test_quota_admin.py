"""Configuring quotas at run time on one broker process: AlterClientQuotas and DescribeClientQuotas
v0-v1 on the wire (match types exact, default and any; strict; Kafka's errors), `odradek configs`
with kafka-configs.sh's flags and lines, the controller mutation quota on CreateTopics (refused from
v6, throttled before), the static defaults refused at start, and a quota group on /metrics and in
the web console."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    DescribeClientQuotasRequest,
)
from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.cluster import eventually
from tests.exit_report import exit_report
from tests.quotas.helpers import configs
from tests.scrape import scrape, value
from tests.server.raw_client import RawClient

Entity = AlterClientQuotasRequest.EntityData
Op = AlterClientQuotasRequest.OpData
Component = DescribeClientQuotasRequest.ComponentData
EXACT, DEFAULT, ANY = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("quota-admin")
    overrides = {"http.listeners": f"http://127.0.0.1:{free_port()}"}
    with BrokerProcess(root / "data", output_path=root / "broker.out", overrides=overrides) as process:
        yield process


def alter(client: RawClient, version: int, *entries: tuple[list[Entity], list[Op]]) -> list[tuple[int, str]]:
    request = AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(e, o) for e, o in entries])
    response = client.call(ApiKey.ALTER_CLIENT_QUOTAS, version, request)
    return [(entry.error_code, entry.error_message) for entry in response.entries]


def describe(client: RawClient, *components: Component, strict: bool = False) -> set[tuple]:
    request = DescribeClientQuotasRequest(components=list(components), strict=strict)
    response = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, request)
    assert response.error_code == 0, response.error_message
    return {
        (
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            tuple(sorted((v.key, v.value) for v in entry.values)),
        )
        for entry in response.entries
    }


def test_quotas_are_altered_and_described_with_kafkas_match_types(broker):
    with RawClient(broker.bootstrap) as client:
        assert (
            alter(
                client,
                1,
                (
                    [Entity("user", "alice")],
                    [Op("producer_byte_rate", 1024.0), Op("request_percentage", 50.0)],
                ),
                ([Entity("user", "alice"), Entity("client-id", None)], [Op("consumer_byte_rate", 2048.0)]),
                ([Entity("client-id", "app")], [Op("controller_mutation_rate", 10.0)]),
                ([Entity("user", None)], [Op("producer_byte_rate", 4096.0)]),
            )
            == [(0, None)] * 4
        )
        assert alter(
            client,
            0,
            ([Entity("user", "alice")], [Op("request_percentage", 0.0, remove=True)]),
            ([Entity("user", "bob"), Entity("user", "eve")], [Op("producer_byte_rate", 1.0)]),
            ([Entity("client-id", "x")], [Op("producer_byte_rate", 1.5)]),
            ([Entity("client-id", "x")], [Op("nosuch", 1.0)]),
            ([Entity("client-id", "x")], [Op("producer_byte_rate", 1.0), Op("producer_byte_rate", 2.0)]),
            ([Entity("ip", "1.2.3.4")], [Op("connection_creation_rate", 1.0)]),
        )[0] == (0, None)
        refused = alter(
            client,
            1,
            ([Entity("user", "bob"), Entity("user", "eve")], [Op("producer_byte_rate", 1.0)]),
            ([Entity("client-id", "x")], [Op("producer_byte_rate", 1.5)]),
            ([Entity("client-id", "x")], [Op("nosuch", 1.0)]),
            ([Entity("client-id", "x")], [Op("producer_byte_rate", 1.0), Op("producer_byte_rate", 2.0)]),
            ([Entity("ip", "1.2.3.4")], [Op("connection_creation_rate", 1.0)]),
            ([Entity("client-id", "x")], [Op("consumer_byte_rate", -5.0)]),
        )
        assert [code for code, _ in refused] == [ErrorCode.INVALID_REQUEST] * 6
        assert "must be a Long value" in refused[1][1]

        alice = ((("user", "alice"),), (("producer_byte_rate", 1024.0),))
        alice_default = ((("user", "alice"), ("client-id", None)), (("consumer_byte_rate", 2048.0),))
        app = ((("client-id", "app"),), (("controller_mutation_rate", 10.0),))
        default_user = ((("user", None),), (("producer_byte_rate", 4096.0),))
        assert describe(client) == {alice, alice_default, app, default_user}
        assert describe(client, Component("user", EXACT, "alice")) == {alice, alice_default}
        assert describe(client, Component("user", EXACT, "alice"), strict=True) == {alice}
        assert describe(client, Component("user", DEFAULT, None)) == {default_user}
        assert describe(client, Component("user", ANY, None), strict=True) == {alice, default_user}
        assert describe(client, Component("user", ANY, None), Component("client-id", DEFAULT, None)) == {
            alice_default
        }
        assert describe(client, Component("client-id", ANY, None), strict=True) == {app}
        assert describe(client, Component("ip", ANY, None)) == set()

        # the default user would take the other tests' anonymous clients (it ranks above client ids)
        assert alter(client, 1, ([Entity("user", None)], [Op("producer_byte_rate", 0.0, remove=True)])) == [
            (0, None)
        ]
        assert default_user not in describe(client)

        for components in (
            [Component("user", EXACT, None)],
            [Component("user", DEFAULT, "x")],
            [Component("user", ANY, None), Component("user", ANY, None)],
            [Component("ip", ANY, None), Component("user", ANY, None)],
        ):
            request = DescribeClientQuotasRequest(components=components)
            response = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, request)
            assert (response.error_code, response.entries) == (ErrorCode.INVALID_REQUEST, None)


def test_the_configs_tool_speaks_kafka_configs(broker):
    b = broker.bootstrap
    both = [
        "--entity-type",
        "users",
        "--entity-name",
        "tool-user",
        "--entity-type",
        "clients",
        "--entity-name",
        "c1",
    ]
    assert configs(
        b, "--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=25", *both
    ) == ("Completed updating config for user tool-user.\n")
    default_clients = ["--entity-type", "clients", "--entity-default"]
    assert configs(b, "--alter", "--add-config", "consumer_byte_rate=10", *default_clients) == (
        "Completed updating default config for clients in the cluster.\n"
    )
    assert configs(b, "--describe", *both) == (
        "Quota configs for user-principal 'tool-user', client-id 'c1' are "
        "producer_byte_rate=1048576.0, request_percentage=25.0\n"
    )
    assert configs(b, "--describe", "--entity-type", "clients", "--entity-default") == (
        "Quota configs for the default client-id are consumer_byte_rate=10.0\n"
    )
    assert configs(b, "--alter", "--delete-config", "request_percentage", *both).startswith("Completed")
    assert "request_percentage" not in configs(b, "--describe", *both)
    done = subprocess.run(
        [sys.executable, "-m", "odradek", "configs", "--bootstrap-server", b, "--alter", "--delete-config",
         "request_percentage", *both],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (1, "Error: Invalid config(s): request_percentage\n")
    configs(
        b, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients", "--entity-default"
    )


def create_topics(client: RawClient, version: int, *names: str, partitions: int = 6) -> tuple[int, list[int]]:
    request = CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(n, partitions, 1) for n in names], timeout_ms=0
    )
    response = client.call(ApiKey.CREATE_TOPICS, version, request)
    return response.throttle_time_ms, [t.error_code for t in response.topics]


def test_create_topics_takes_from_the_controller_mutation_quota(broker):
    # the raw client's id is "tests": 1 partition/s, a burst of 11 (quota.window.num 11 x 1 s)
    configs(broker.bootstrap, "--alter", "--add-config", "controller_mutation_rate=1",
            "--entity-type", "clients", "--entity-name", "tests")  # fmt: skip
    try:
        with RawClient(broker.bootstrap, timeout=30) as client, RawClient(broker.bootstrap) as other:
            throttle, errors = create_topics(client, 7, "mut-a", "mut-b", partitions=6)
            assert errors == [0, 0] and throttle > 0  # the second took the bucket below zero
            # the group's other connection is not muted, but its bucket is still empty
            throttle, errors = create_topics(other, 7, "mut-c")
            assert errors == [ErrorCode.THROTTLING_QUOTA_EXCEEDED] and throttle > 0
            throttle, errors = create_topics(client, 5, "mut-d")  # before v6: created, throttled
            assert errors == [0] and throttle > 0
            request = CreateTopicsRequest(
                topics=[CreateTopicsRequest.CreatableTopic("mut-e", 6, 1)], timeout_ms=0, validate_only=True
            )
            response = client.call(ApiKey.CREATE_TOPICS, 7, request)  # validate_only is not counted
            assert [t.error_code for t in response.topics] == [0]
    finally:
        configs(broker.bootstrap, "--alter", "--delete-config", "controller_mutation_rate",
                "--entity-type", "clients", "--entity-name", "tests")  # fmt: skip


def test_static_quota_defaults_are_refused_at_start(tmp_path):
    for key, dynamic in (
        ("quota.producer.default", "producer_byte_rate"),
        ("quota.consumer.default", "consumer_byte_rate"),
    ):
        argv = [sys.executable, "-m", "odradek", "serve", "--override", f"log.dirs={tmp_path}"]
        done = subprocess.run(
            [*argv, "--override", f"{key}=1048576"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, exit_report(done)
        assert key in done.stderr and f"--add-config {dynamic}=" in done.stderr
        assert "--entity-default" in done.stderr and "Traceback" not in done.stderr


def test_a_quota_group_shows_on_metrics_and_in_the_console(broker):
    configs(broker.bootstrap, "--alter", "--add-config", "producer_byte_rate=1000",
            "--entity-type", "clients", "--entity-name", "metered")  # fmt: skip
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("metered", 1, 1)])["metered"].result(30)
    # one request of 50 kB, ten windows' worth at once: answered at once, then throttled
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "metered", "linger.ms": 200})
    for _ in range(10):
        producer.produce("metered", b"m" * 5000)
    assert producer.flush(60) == 0
    http = broker.overrides["http.listeners"]
    labels = {"resource": "Produce", "clientId": "metered"}

    def throttled() -> dict | None:
        samples = scrape(f"{http}/metrics")
        return samples if value(samples, "kafka_server_quota_throttle_time", 0, **labels) else None

    samples = eventually(throttled, 30, "a throttled quota group on /metrics")
    assert value(samples, "kafka_server_quota_byte_rate", **labels) > 0
    assert value(samples, "kafka_network_requestmetrics_throttletimems_sum", request="Produce") > 0
    with urllib.request.urlopen(f"{http}/quotas", timeout=30) as page:
        html = page.read().decode()
    assert "metered" in html and '<td class="num">1000</td>' in html and "producer_byte_rate" in html
