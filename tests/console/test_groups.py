"""The console's group pages in a headless Chromium against one writable broker process: a classic
consumer group ("billing", a confluent-kafka consumer that read and committed a two-partition topic)
with its lag, its offsets reset (every topic to earliest, one partition to an offset, every topic to a
time) through preview and execute, a reset and a deletion refused while a consumer is in the group,
a topic's committed offsets deleted, the group deleted after its id is typed to confirm, and a share
group (a confluent-kafka ShareConsumer) in the list and on its own page, its deletion refused while
it has a member and done once it is empty, and so its start offsets' reset. Each change is checked a
second way: `odradek consumer-groups --describe` as a process, or confluent-kafka's AdminClient. And
every group template without its forms in read-only mode."""

from __future__ import annotations

import datetime
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import jinja2
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, ShareConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from markupsafe import Markup

from odradek.client import KafkaClient, TopicPartition
from odradek.client.group_admin import GroupReport, PartitionRow, ResetTarget
from odradek.client.share_admin import ShareAdmin, ShareGroupReport
from odradek.console.filters import FILTERS
from odradek.console.group_pages import ResetPlan, ResetRow
from odradek.testing.cluster import eventually
from tests.console.browsing import snapshot, submit, visit

TOPIC, GROUP, SHARE_GROUP = "invoices", "billing", "shipping"
RECORDS = 10
BASE_MS = int(datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).timestamp() * 1000)
SHARE_SETTINGS = {
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def console(console_broker_at: Any) -> Iterator[tuple[str, str]]:
    process, base = console_broker_at(**{"console.read.only": "false", **SHARE_SETTINGS})
    bootstrap = process.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):  # partition i % 2, one second apart from BASE_MS
        producer.produce(TOPIC, value=b"invoice %d" % i, partition=i % 2, timestamp=BASE_MS + i * 1000)
    assert producer.flush(30) == 0
    _consume_and_commit(bootstrap, GROUP)
    _consume_and_commit(bootstrap, "audit")
    yield bootstrap, base


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def _consume_and_commit(bootstrap: str, group: str) -> None:
    consumer = _consumer(bootstrap, group)
    consumer.subscribe([TOPIC])
    read = 0
    deadline = time.monotonic() + 30
    while read < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        read += message is not None and message.error() is None
    assert read == RECORDS
    consumer.commit(asynchronous=False)
    consumer.close()


def current_offsets(bootstrap: str, group: str) -> dict[int, str]:
    """CURRENT-OFFSET by partition, as `odradek consumer-groups --describe` prints it."""
    described = subprocess.run(
        [sys.executable, "-m", "odradek", "consumer-groups", "--bootstrap-server", bootstrap,
         "--describe", "--group", group],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith(group + " ")]
    return {int(row[2]): row[3] for row in rows if row[1] == TOPIC}


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets of TOPIC by partition, by confluent-kafka's AdminClient."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(TOPIC, p) for p in (0, 1)])
    (future,) = admin.list_consumer_group_offsets([request]).values()
    return {tp.partition: tp.offset for tp in future.result(timeout=30).topic_partitions if tp.offset >= 0}


def test_consumer_group_lag_reset_refusal_and_delete(console, browser, screenshots):
    bootstrap, base = console
    listed = visit(browser, screenshots, base + "/groups", "groups-list")
    assert f"{GROUP} Classic Empty 0 0" in listed

    page = visit(browser, screenshots, base + f"/group?id={GROUP}", "groups-group")
    assert f"{TOPIC} 0 5 5 0" in page and f"{TOPIC} 1 5 5 0" in page

    # every topic to earliest: preview, then execute
    preview = submit(browser, "form#reset", scope="all", target="earliest")
    assert f"{TOPIC} 0 5 0" in preview and f"{TOPIC} 1 5 0" in preview
    snapshot(browser, screenshots, "groups-reset-preview")
    done = submit(browser, "form#execute")
    assert f"Offsets of group '{GROUP}' reset: {TOPIC}-0 to 0, {TOPIC}-1 to 0" in done
    assert f"{TOPIC} 0 0 5 5" in done
    assert current_offsets(bootstrap, GROUP) == {0: "0", 1: "0"}

    # one partition to an offset
    preview = submit(browser, "form#reset", scope="partition", topic=TOPIC, partition="1", target="offset",
                     offset="3")  # fmt: skip
    assert f"{TOPIC} 1 0 3" in preview and f"{TOPIC} 0 " not in preview.split("New offset")[1]
    submit(browser, "form#execute")
    assert committed(bootstrap, GROUP) == {0: 0, 1: 3}

    # every topic to a time: the first record at or after BASE + 5 s is record 6 (partition 0,
    # offset 3) and record 5 (partition 1, offset 2)
    preview = submit(
        browser, "form#reset", scope="topic", topic=TOPIC, target="time", time="2026-01-01T00:00:05"
    )
    assert f"{TOPIC} 0 0 3" in preview and f"{TOPIC} 1 3 2" in preview
    submit(browser, "form#execute")
    assert committed(bootstrap, GROUP) == {0: 3, 1: 2}

    _refused_while_a_consumer_is_in(bootstrap, base, browser, screenshots)

    # a topic's committed offsets deleted (another group)
    visit(browser, screenshots, base + "/group?id=audit", "groups-audit")
    deleted = submit(browser, "form#delete-offsets", topic=TOPIC)
    assert f"Committed offsets of topic '{TOPIC}' deleted from group 'audit'." in deleted
    assert committed(bootstrap, "audit") == {}

    # delete: a wrong confirmation keeps the group, the group id deletes it
    visit(browser, screenshots, base + f"/group?id={GROUP}", "groups-delete")
    browser.execute_script("document.getElementById('reset').scrollIntoView()")
    snapshot(browser, screenshots, "groups-delete")  # the forms: reset, delete offsets, delete
    kept = submit(browser, "form#delete", confirm="billin")
    assert f"Not deleted: type the group id ({GROUP}) to confirm." in kept
    gone = submit(browser, "form#delete", confirm=GROUP)
    assert f"Group '{GROUP}' deleted." in gone
    assert browser.current_url == base + "/groups"
    assert f"{GROUP} " not in gone.split("Lag (sum)")[1]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    groups = admin.list_consumer_groups().result(timeout=30)
    assert GROUP not in {g.group_id for g in groups.valid}


def _refused_while_a_consumer_is_in(bootstrap: str, base: str, browser: Any, screenshots: Any) -> None:
    stop, joined = threading.Event(), threading.Event()

    def consume() -> None:
        consumer = _consumer(bootstrap, GROUP)
        consumer.subscribe([TOPIC], on_assign=lambda _c, _p: joined.set())
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        assert joined.wait(30), "the consumer joined"
        page = eventually(
            lambda: (
                (text := visit(browser, screenshots, base + f"/group?id={GROUP}", "groups-active"))
                and "State: Stable" in text
                and text
            ),
            30,
            "the group stable with its member",
        )
        assert "rdkafka" in page
        preview = submit(browser, "form#reset", scope="all", target="latest")
        assert "The group has members" in preview and f"{TOPIC} 0 3 5" in preview
        refused = submit(browser, "form#execute")
        assert "Refused: UNKNOWN_MEMBER_ID" in refused
        assert "offsets can be reset only while it has none" in refused
        snapshot(browser, screenshots, "groups-reset-refused")
        assert committed(bootstrap, GROUP) == {0: 3, 1: 2}
        refused = submit(browser, "form#delete", confirm=GROUP)
        assert "Refused: NON_EMPTY_GROUP" in refused
    finally:
        stop.set()
        thread.join(30)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def empty() -> bool:
        (described,) = admin.describe_consumer_groups([GROUP]).values()
        return str(described.result(timeout=30).state).endswith("EMPTY")

    eventually(empty, 30, "the group empty again")


def test_share_group_in_the_list_and_on_its_page(console, browser, screenshots):
    bootstrap, base = console
    admin = AdminClient({"bootstrap.servers": bootstrap})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.GROUP, SHARE_GROUP, incremental_configs=[earliest])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": SHARE_GROUP, "client.id": "packer"})
    consumer.subscribe([TOPIC])
    try:
        received = 0
        deadline = time.monotonic() + 30
        while received < RECORDS and time.monotonic() < deadline:
            received += sum(1 for m in consumer.poll(0.5) if m.error() is None)
        assert received == RECORDS
        consumer.poll(0.5)  # acknowledges the last records

        def listed() -> str | None:
            text = visit(browser, screenshots, base + "/groups", "groups-list-share")
            return text if f"{SHARE_GROUP} Share Stable 1 0" in text else None

        eventually(listed, 20, "the share group listed, stable with one member and no lag")
        page = visit(browser, screenshots, base + f"/group?id={SHARE_GROUP}", "groups-share")
        assert "Type: share group (KIP-932). State: Stable." in page
        assert "packer /127.0.0.1" in page and f"{TOPIC}-0, {TOPIC}-1" in page
        assert f"{TOPIC} 0 5 0 0" in page and f"{TOPIC} 1 5 0 0" in page  # start offset, leader epoch, lag
        refused = submit(browser, "form#delete", confirm=SHARE_GROUP)
        assert "Refused: NON_EMPTY_GROUP" in refused
        submit(browser, "form#reset", target="earliest")
        refused = submit(browser, "form#execute")
        assert "Refused: NON_EMPTY_GROUP" in refused
        snapshot(browser, screenshots, "groups-share-reset-refused")
        assert start_offsets(bootstrap) == {0: 5, 1: 5}
    finally:
        consumer.close()

    def empty() -> str | None:
        text = visit(browser, screenshots, base + f"/group?id={SHARE_GROUP}", "groups-share-empty")
        return text if "State: Empty" in text and "No members." in text else None

    eventually(empty, 20, "the share group without members")
    preview = submit(browser, "form#reset", target="earliest")
    assert f"{TOPIC} 0 5 0" in preview and f"{TOPIC} 1 5 0" in preview
    snapshot(browser, screenshots, "groups-share-reset-preview")
    done = submit(browser, "form#execute")
    assert f"Start offsets of share group '{SHARE_GROUP}' reset: {TOPIC}-0 to 0, {TOPIC}-1 to 0" in done
    assert f"{TOPIC} 0 0 0 5" in done  # start offset, leader epoch, lag
    assert start_offsets(bootstrap) == {0: 0, 1: 0}
    gone = submit(browser, "form#delete", confirm=SHARE_GROUP)
    assert f"Group '{SHARE_GROUP}' deleted." in gone and f"{SHARE_GROUP} Share" not in gone
    assert SHARE_GROUP not in share_groups(bootstrap)


def start_offsets(bootstrap: str) -> dict[int, int]:
    """The share group's start offsets of TOPIC by partition, from odradek's share admin client."""
    with KafkaClient(bootstrap, timeout_s=10) as client:
        offsets = ShareAdmin(client, 10).start_offsets(SHARE_GROUP)
    return {o.tp.partition: o.start_offset for o in offsets if o.tp.topic == TOPIC}


def share_groups(bootstrap: str) -> list[str]:
    """The share groups `odradek share-groups --list` prints."""
    listed = subprocess.run(
        [sys.executable, "-m", "odradek", "share-groups", "--bootstrap-server", bootstrap, "--list"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return listed.stdout.split()


@pytest.mark.parametrize("read_only", [True, False])
def test_group_forms_only_when_writable(read_only: bool) -> None:
    """Every group template shows its forms only when the console is not read-only."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("odradek.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(FILTERS)
    env.globals["static"] = lambda name: "/static/" + name
    common = {
        "nav": (), "path": "/group", "session": None, "csrf_token": "t", "csrf_field": "csrf_token",
        "csrf_input": Markup('<input type="hidden" name="csrf_token" value="t">'), "flashes": [],
        "read_only": read_only, "login": False, "title": "t", "history": [], "partition_history": {},
    }  # fmt: skip
    tp = TopicPartition(TOPIC, 0)
    report = GroupReport(
        GROUP, "Empty", "range", "h:1  (0)", (), (PartitionRow(tp, 1, 2, "-", "-", "-"),), {tp: 1}
    )
    share = ShareGroupReport(SHARE_GROUP, "Empty", "h:1  (0)", 1, 1, (), {})
    plan = ResetPlan(GROUP, "Empty", 0, [ResetRow(tp, 1, 0)], [])
    pages = [
        env.get_template("groups/group.html").render(report=report, members=[], topics=[TOPIC], **common),
        env.get_template("groups/share.html").render(report=share, members=[], offsets=[], **common),
        env.get_template("groups/reset.html").render(
            plan=plan,
            target=ResetTarget("earliest"),
            scope="all",
            topic="",
            partition=0,
            share=False,
            **common,
        ),
    ]
    for html in pages:
        assert ("<form" in html) is not read_only
    assert all(f"{TOPIC}:0:0" in html for html in pages[2:]) is not read_only
