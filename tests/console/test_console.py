"""The web console in a real headless Chromium (Debian's chromium and chromium-driver, driven by
Selenium): a broker process with http.listeners, confluent-kafka traffic, then every page loaded,
checked for the cluster's live state, and screenshotted (SCREENSHOTS_ENV names a directory to keep
the screenshots in; else the test's tmp_path). Also `odradek console --bootstrap-server` as a
process against the same broker."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.cluster import eventually
from tests.console.browsing import standalone_console, visit

TOPIC, GROUP = "orders", "billing"
RECORDS, COMMITTED = 6, 2


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    root = tmp_path_factory.mktemp("console")
    port = free_port()
    overrides = {"http.listeners": f"http://127.0.0.1:{port}"}
    with BrokerProcess(root / "data", output_path=root / "broker.out", overrides=overrides) as process:
        _traffic(process.bootstrap)
        yield process, f"http://127.0.0.1:{port}"


def _traffic(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS - 1):
        producer.produce(TOPIC, key=b"order-%d" % i, value=b"paid %d" % i, headers=[("source", b"web")])
    producer.produce(TOPIC, key=None, value=b"\xff\xfe\x00binary")
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    eventually(lambda: consumer.poll(0.5) is not None, 30, "a record consumed")
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
    consumer.close()


def test_every_page_shows_the_live_cluster(console_broker, browser, screenshots):
    process, base = console_broker
    overview = visit(browser, screenshots, base + "/", "cluster")
    assert f"127.0.0.1 {process.port}" in overview and "controller" in overview

    size = sum(f.stat().st_size for f in (process.data_dir / f"{TOPIC}-0").glob("*.log"))
    assert size > 0
    topics = visit(browser, screenshots, base + "/topics", "topics")
    assert f"{TOPIC} 1 1 {RECORDS} 0 {size} {size}" in topics  # ..., size, on disk (DescribeLogDirs)

    topic = visit(browser, screenshots, base + f"/topic?name={TOPIC}", "topic")
    # partition, leader, replicas, ISR, start, end offset, size, replica sizes by broker
    assert f"0 0 0 0 0 6 {size} 0: {size}" in topic

    group = visit(browser, screenshots, base + f"/group?id={GROUP}", "group")
    assert f"{TOPIC} 0 {COMMITTED} {RECORDS} {RECORDS - COMMITTED}" in group
    assert "rdkafka" not in group  # the consumer left: no members

    groups = visit(browser, screenshots, base + "/groups", "groups")
    assert f"{GROUP} Classic Empty 0 {RECORDS - COMMITTED}" in groups  # members, lag

    messages = visit(browser, screenshots, base + f"/messages?topic={TOPIC}&partition=0&offset=0", "messages")
    assert "order-0 paid 0 source: web" in messages
    assert "null 0xfffe0062696e617279" in messages  # not UTF-8: hex

    since = visit(browser, screenshots, base + f"/messages?topic={TOPIC}&time=2000-01-01T00:00:00", "since")
    assert f"{RECORDS} records" in since and "order-0" in since
    future = visit(browser, screenshots, base + f"/messages?topic={TOPIC}&time=2100-01-01T00:00:00", "future")
    assert "0 records" in future


def test_the_pages_follow_the_cluster_as_it_changes(console_broker, browser, screenshots):
    from selenium.webdriver.common.by import By

    process, base = console_broker
    visit(browser, screenshots, base + f"/group?id={GROUP}", "group-before")
    producer = Producer({"bootstrap.servers": process.bootstrap})
    producer.produce(TOPIC, value=b"late")
    assert producer.flush(30) == 0
    group = visit(browser, screenshots, base + f"/group?id={GROUP}", "group-after")
    assert f"{TOPIC} 0 {COMMITTED} {RECORDS + 1} {RECORDS + 1 - COMMITTED}" in group
    points = browser.find_element(By.CSS_SELECTOR, "#lag-chart polyline").get_attribute("points")
    assert len(points.split()) >= 2  # one sample per view at least
    # the partition's own lag line, its last sample the lag the row shows
    line = browser.find_element(By.CSS_SELECTOR, "svg.sparkline title").get_attribute("textContent")
    assert line.startswith(f"now {RECORDS + 1 - COMMITTED}, at most {RECORDS + 1 - COMMITTED}")

    later = visit(
        browser, screenshots, base + f"/messages?topic={TOPIC}&partition=0&offset={RECORDS}", "late"
    )
    assert "late" in later and "1 records" in later


def test_a_consumer_protocol_group_shows_its_epochs(console_broker, browser, screenshots):
    """A live KIP-848 member (group.protocol=consumer): the group page names the protocol, its assignor
    and epochs, and the member's epoch and target partitions."""
    process, base = console_broker
    member = Consumer(
        {
            "bootstrap.servers": process.bootstrap,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "client.id": "live-member",
        }
    )
    member.subscribe([TOPIC])
    try:
        eventually(lambda: member.poll(0.2) is None and len(member.assignment()) == 1, 30, "an assignment")
        group = visit(browser, screenshots, base + "/group?id=kip848", "group-kip848")
        groups = visit(browser, screenshots, base + "/groups", "groups-kip848")
    finally:
        member.close()
    assert "Protocol: consumer (KIP-848), assignor uniform, group epoch" in group
    assert "Member Client id Host Assigned partitions Epoch Target partitions" in group
    assert f"live-member /127.0.0.1 {TOPIC}-0" in group
    assert "kip848 Consumer Stable" in groups


def test_a_bad_form_value_answers_400_on_the_page(console_broker, browser, screenshots):
    _, base = console_broker
    text = visit(browser, screenshots, base + f"/messages?topic={TOPIC}&partition=x", "bad-form")
    assert "Bad request" in text
    # a value from the address is shown as text, never as markup
    text = visit(browser, screenshots, base + f"/messages?topic={TOPIC}&partition=<b>x</b>", "bad-markup")
    assert "'<b>x</b>'" in text
    from selenium.webdriver.common.by import By

    assert browser.find_elements(By.CSS_SELECTOR, "p.warn b") == []


def test_an_unknown_group_or_topic_answers_404_saying_so(console_broker, browser, screenshots):
    _, base = console_broker
    text = visit(browser, screenshots, base + "/group?id=no-such-group", "unknown-group")
    assert "There is no consumer group named 'no-such-group'." in text and "Dead" not in text
    text = visit(browser, screenshots, base + "/topic?name=no-such-topic", "unknown-topic")
    assert "There is no topic named 'no-such-topic'." in text
    assert "a group id is needed" in visit(browser, screenshots, base + "/group?id=", "empty-group")
    for path in ("/group?id=no-such-group", "/topic?name=no-such-topic"):
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(base + path, timeout=30)
        answer.value.close()
        assert answer.value.code == 404


def test_odradek_console_serves_the_pages_of_a_broker_without_http_listeners(
    console_broker, browser, screenshots
):
    process, _ = console_broker
    with standalone_console(process.bootstrap) as url:
        topics = visit(browser, screenshots, f"{url}/topics", "standalone-topics")
        assert TOPIC in topics
        topic = visit(browser, screenshots, f"{url}/topic?name={TOPIC}", "standalone-topic")
        assert "End offset" in topic and "Size (bytes)" in topic  # from the broker's DescribeLogDirs
