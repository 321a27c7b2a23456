"""The console's partition reassignment pages on a three-broker cluster (ZooKeeper, racks rack-1..3):
a topic's partitions planned onto other brokers with a new replication factor, executed with a
throttle, watched until done, its throttles removed; and a reassignment held back by a tiny throttle
cancelled. Each result is checked outside the console: ZooKeeper's znodes, Metadata, the records
read back, the configs described by confluent_kafka's AdminClient, `odradek reassign-partitions
--list`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from odradek.testing.cluster import LocalCluster, eventually
from odradek.testing.zookeeper import ZooKeeperServer
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS, topic_name
from tests.console.browsing import snapshot, submit, visit

pytestmark = pytest.mark.slow

TIMEOUT_S = 30.0
QUIET = {"log_level": 3}
RECORDS = 300
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
DYNAMIC = (ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    made = LocalCluster(
        tmp_path_factory.mktemp("reassignment"),
        3,
        zookeeper_connect=zookeeper.connect_string,
        session_timeout_ms=CLUSTER_SESSION_TIMEOUT_MS,
        overrides={"console.read.only": "false"},
        metrics=True,
    )
    try:
        read_only = made.brokers[3] = made.broker(3)  # broker 3's console is read-only
        read_only.overrides["console.read.only"] = "true"
        read_only.spawn()
        made.start(processes=[1, 2])
        assert read_only.wait_listening(TIMEOUT_S), read_only.output_tail()
        made.wait_for_controller()
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def console(cluster: LocalCluster) -> str:
    """Broker 1's console."""
    return cluster.brokers[1].overrides["http.listeners"]


@pytest.fixture(scope="module")
def read_only_console(cluster: LocalCluster) -> str:
    return cluster.brokers[3].overrides["http.listeners"]


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})


def on_broker_1(
    admin: AdminClient, bootstrap: str, topic: str, partitions: int, records: int, size: int
) -> None:
    """A topic whose partitions all live on broker 1 alone, with `records` records of `size` bytes."""
    new = NewTopic(topic, num_partitions=partitions, replica_assignment=[[1]] * partitions)
    admin.create_topics([new], operation_timeout=30)[topic].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    for i in range(records):
        producer.produce(
            topic, key=b"%d" % i, value=b"%06d" % i + b"x" * (size - 6), partition=i % partitions
        )
    assert producer.flush(TIMEOUT_S) == 0


def configs(admin: AdminClient, kind: str, name: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The `keys` set dynamically on the broker or topic."""
    resource = ConfigResource(kind, name)
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    return {
        k: entries[k].value
        for k in keys
        if k in entries and entries[k].source in DYNAMIC and entries[k].value
    }


def throttles(admin: AdminClient, topic: str) -> dict[str, dict[str, str]]:
    found = {f"broker {b}": configs(admin, "broker", str(b), RATES) for b in (1, 2, 3)}
    found[topic] = configs(admin, "topic", topic, REPLICA_LISTS)
    return {k: v for k, v in found.items() if v}


def text_of(browser: Any) -> str:
    """The page's text; "" while the page is being reloaded (htmx reloads it when the moves change)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        return browser.find_element(By.TAG_NAME, "body").text
    except WebDriverException:  # the document went away while being read
        return ""


def plan(
    browser: Any, console: str, screenshots: Path, topic: str, brokers: set[int], rf: str, name: str
) -> str:
    visit(browser, screenshots, f"{console}/reassignments", "reassignments-list")
    choice = {f"broker-{b}": "on" if b in brokers else "off" for b in (1, 2, 3)}
    shown = submit(browser, "form#plan", topic=topic, replication_factor=rf, **choice)
    snapshot(browser, screenshots, name)
    return shown


def test_a_topic_moved_onto_two_other_brokers_with_a_throttle_and_its_throttles_removed(
    cluster: LocalCluster, console: str, admin: AdminClient, browser: Any, screenshots: Path
) -> None:
    topic = topic_name("moved")
    on_broker_1(admin, cluster.bootstrap, topic, 2, RECORDS, 100)

    # a plan's form values are checked
    for query, refusal in (
        (f"topic={topic}", "Bad request\nChoose at least one broker."),
        (f"topic={topic}&broker-2=on&replication_factor=2", "must be between 1 and 1 (the chosen brokers)"),
        (f"topic=no-{topic}&broker-2=on", f"Not found\nThere is no topic named 'no-{topic}'."),
    ):
        browser.get(f"{console}/reassignments/plan?{query}")
        assert refusal in text_of(browser)

    shown = plan(browser, console, screenshots, topic, {2, 3}, "2", "reassignments-plan")
    assert f"Reassignment plan for {topic}" in shown
    assert "Brokers 2, 3, replication factor 2, rack-aware" in shown
    for p in (0, 1):
        assert any(f"{p} 1 → {r}" in shown for r in ("2, 3", "3, 2")), shown

    shown = submit(browser, "form#execute", throttle="10000000")
    assert f"Started reassigning 2 partition(s) of {topic}, throttled to 10000000 B/s." in shown
    # the throttles as --execute sets them: on the topic (sources as leaders, new replicas as
    # followers) and on every broker involved, until they are removed
    set_now = throttles(admin, topic)
    assert set_now[topic] == {REPLICA_LISTS[0]: "0:1,1:1", REPLICA_LISTS[1]: "0:2,0:3,1:2,1:3"}
    for b in (1, 2, 3):
        assert set_now[f"broker {b}"] == dict.fromkeys(RATES, "10000000")

    # the page (polled every 2 s, reloaded when the moves change) shows the reassignment gone
    eventually(lambda: "Remove throttles" in text_of(browser), TIMEOUT_S, "the reassignment done on the page")
    shown = text_of(browser)
    assert "No partition reassignment in progress." in shown
    assert "broker 2 follower.replication.throttled.rate 10000000" in shown
    snapshot(browser, screenshots, "reassignments-done")
    for p in (0, 1):
        assert sorted(cluster.replicas(topic, p)) == [2, 3]
        assert sorted((cluster.state(topic, p) or {}).get("isr", ())) == [2, 3]
    metadata = admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions
    assert {p: (sorted(m.replicas), sorted(m.isrs)) for p, m in metadata.items()} == {
        0: ([2, 3], [2, 3]),
        1: ([2, 3], [2, 3]),
    }

    shown = submit(browser, "form#remove-throttles")
    assert "Removed the replication throttles." in shown
    assert "No replication throttle is set." in shown
    assert throttles(admin, topic) == {}

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"read-{topic}",
            "auto.offset.reset": "earliest",
            **QUIET,
        }
    )
    consumer.subscribe([topic])
    values: set[bytes] = set()
    try:
        eventually(lambda: _read(consumer, values) >= RECORDS, TIMEOUT_S, f"{RECORDS} records read back")
    finally:
        consumer.close()
    assert {v[:6] for v in values} == {b"%06d" % i for i in range(RECORDS)}


def _read(consumer: Consumer, values: set[bytes]) -> int:
    for message in consumer.consume(500, timeout=0.5):
        if message.error() is None:
            values.add(message.value())
    return len(values)


def test_a_reassignment_held_back_by_a_tiny_throttle_is_cancelled_then_finishes_once_the_rate_is_raised(
    cluster: LocalCluster,
    console: str,
    read_only_console: str,
    admin: AdminClient,
    browser: Any,
    screenshots: Path,
) -> None:
    from selenium.webdriver.common.by import By

    topic = topic_name("held")
    # more than one fetch's worth (replica.fetch.max.bytes, 1 MiB): a throttle lets one read pass
    on_broker_1(admin, cluster.bootstrap, topic, 1, 2500, 1000)

    def held() -> bool:
        text = text_of(browser)
        return f"{topic} 0 2, 1 2 1 1 1\nbroker 2:" in text and "not in ISR" in text

    def start_held_move() -> None:
        shown = plan(browser, console, screenshots, topic, {2}, "", "reassignments-plan-one-broker")
        assert "0 1 → 2" in shown
        shown = submit(browser, "form#execute", throttle="1")
        assert f"Started reassigning 1 partition(s) of {topic}, throttled to 1 B/s." in shown
        eventually(held, TIMEOUT_S, "the reassignment in progress on the page")
        assert sorted(cluster.replicas(topic, 0)) == [1, 2]  # the target and the original, while moving

    start_held_move()
    snapshot(browser, screenshots, "reassignments-progress")
    # a read-only console shows it, with no form at all
    shown = visit(browser, screenshots, f"{read_only_console}/reassignments", "reassignments-read-only")
    assert held() and "No replication throttle is set." not in shown
    assert browser.find_elements(By.CSS_SELECTOR, "main form") == []
    browser.get(f"{read_only_console}/reassignments/plan?topic={topic}&broker-3=on")
    assert "0 2, 1 → 3" in text_of(browser) and browser.find_elements(By.CSS_SELECTOR, "main form") == []

    browser.get(f"{console}/reassignments")
    shown = submit(browser, "form.cancel")
    assert f"Cancelled the reassignment of {topic}-0; every throttle removed." in shown
    assert "No partition reassignment in progress." in shown and "No replication throttle is set." in shown
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "reassign-partitions",
            "--bootstrap-server",
            cluster.bootstrap,
            "--list",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    assert listed.stdout.strip() == "No partition reassignments found."
    eventually(lambda: cluster.replicas(topic, 0) == [1], TIMEOUT_S, "the original replicas back")
    assert throttles(admin, topic) == {}

    # again, then the rate raised outside the console: the open page follows the move to its end
    start_held_move()
    for b in (1, 2):  # librdkafka takes one broker per call
        raised = ConfigResource(
            "broker",
            str(b),
            incremental_configs=[
                ConfigEntry(r, "100000000", incremental_operation=AlterConfigOpType.SET) for r in RATES
            ],
        )
        admin.incremental_alter_configs([raised])[raised].result(TIMEOUT_S)
    eventually(lambda: "Remove throttles" in text_of(browser), TIMEOUT_S, "the page seeing the move done")
    assert "No partition reassignment in progress." in text_of(browser)
    assert cluster.replicas(topic, 0) == [2]
    assert (cluster.state(topic, 0) or {}).get("isr") == [2]
    submit(browser, "form#remove-throttles")
    assert throttles(admin, topic) == {}
