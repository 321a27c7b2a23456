"""The topic pages' actions in a real headless Chromium: create a topic (partitions, replication
factor, configs), view and edit its configs (sources and defaults shown, an override set and removed,
a bad value refused), add partitions, delete it (only with its name typed), each checked through
confluent_kafka's AdminClient; and a read-only console, which shows no form and refuses the POST."""

from __future__ import annotations

import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from odradek.testing.cluster import eventually
from tests.console.browsing import snapshot, submit, visit

TOPIC = "orders-x"
HOUR_MS, TWO_HOURS_MS, WEEK_MS = "3600000", "7200000", str(7 * 24 * 3600 * 1000)
# retention.ms's default, as Kafka reports it: the broker synonym log.retention.hours
HOURS = "168 (log.retention.hours)"


@pytest.fixture(scope="module")
def consoles(console_broker_at):
    """A writable console and a read-only one (the default), each on a broker of its own, started
    side by side."""
    with ThreadPoolExecutor(2) as pool:
        writable = pool.submit(console_broker_at, **{"console.read.only": "false"})
        read_only = pool.submit(console_broker_at)
        return writable.result(), read_only.result()


@pytest.fixture(scope="module")
def writable(consoles):
    return consoles[0]


@pytest.fixture(scope="module")
def admin(writable) -> AdminClient:
    process, _ = writable
    return AdminClient({"bootstrap.servers": process.bootstrap})


def _partitions(admin: AdminClient, topic: str) -> int | None:
    found = admin.list_topics(timeout=10).topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def _config(admin: AdminClient, topic: str, key: str):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=10)[key]


def _row(text: str, name: str) -> str:
    """The line of the page's text that starts with config `name`."""
    return next(line for line in text.splitlines() if line.startswith(name + " "))


def test_create_a_topic_with_partitions_and_configs(writable, admin, browser, screenshots):
    from selenium.webdriver.common.by import By

    _, base = writable
    visit(browser, screenshots, base + "/topics", "topics-list-writable")
    page = submit(
        browser,
        "form.topic-create",
        name=TOPIC,
        partitions="3",
        replication_factor="1",
        configs=f"retention.ms={HOUR_MS}\n",
    )
    snapshot(browser, screenshots, "topics-created")
    assert f"Created topic {TOPIC}." in page and f"Topic {TOPIC}" in page
    assert _partitions(admin, TOPIC) == 3
    retention = _config(admin, TOPIC, "retention.ms")
    assert (retention.value, retention.source) == (HOUR_MS, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    # refusals are flashed and create nothing
    browser.get(base + "/topics")
    assert "Refused: TOPIC_ALREADY_EXISTS" in submit(browser, "form.topic-create", name=TOPIC)
    page = submit(browser, "form.topic-create", name="orders-y", configs="retention.ms=soon")
    assert "Refused: INVALID_CONFIG" in page and "retention.ms" in page
    page = submit(browser, "form.topic-create", name="orders-z", replication_factor="3", configs="")
    snapshot(browser, screenshots, "topics-create-refused")
    assert "Refused: INVALID_REPLICATION_FACTOR" in page
    form = browser.find_element(By.CSS_SELECTOR, "form.topic-create")  # drawn again with the values given
    assert form.find_element(By.NAME, "name").get_attribute("value") == "orders-z"
    assert form.find_element(By.NAME, "replication_factor").get_attribute("value") == "3"
    page = submit(
        browser, "form.topic-create", name="orders-w", replication_factor="", configs="retention.ms"
    )
    assert "Refused: expected one key=value a line" in page
    assert [_partitions(admin, t) for t in ("orders-y", "orders-z", "orders-w")] == [None, None, None]


def test_configs_show_sources_and_defaults_and_edit(writable, admin, browser, screenshots):
    _, base = writable
    url = base + f"/topic/configs?name={TOPIC}"
    text = visit(browser, screenshots, url, "topics-configs")
    assert _row(text, "retention.ms").startswith(
        f"retention.ms overridden {HOUR_MS} DYNAMIC_TOPIC_CONFIG {HOURS} DEFAULT_CONFIG"
    )
    segment = str(1 << 30)
    assert _row(text, "segment.bytes").startswith(
        f"segment.bytes {segment} DEFAULT_CONFIG {segment} (log.segment.bytes) DEFAULT_CONFIG"
    )

    page = submit(browser, 'form.config-set[data-key="retention.ms"]', value=TWO_HOURS_MS)
    assert f"Set retention.ms={TWO_HOURS_MS} on topic {TOPIC}." in page
    assert _config(admin, TOPIC, "retention.ms").value == TWO_HOURS_MS

    page = submit(browser, 'form.config-set[data-key="retention.ms"]', value="soon")
    snapshot(browser, screenshots, "topics-config-refused")
    assert "Refused: INVALID_CONFIG" in page
    assert _row(page, "retention.ms").startswith(
        f"retention.ms overridden {TWO_HOURS_MS} DYNAMIC_TOPIC_CONFIG"
    )
    assert _config(admin, TOPIC, "retention.ms").value == TWO_HOURS_MS

    page = submit(browser, 'form.config-delete[data-key="retention.ms"]')
    assert f"Removed the override of retention.ms on topic {TOPIC}." in page
    assert _row(page, "retention.ms").startswith(
        f"retention.ms {WEEK_MS} DEFAULT_CONFIG {HOURS} DEFAULT_CONFIG"
    )
    retention = _config(admin, TOPIC, "retention.ms")
    assert (retention.value, retention.source) == (WEEK_MS, ConfigSource.DEFAULT_CONFIG.value)


def test_add_partitions(writable, admin, browser, screenshots):
    _, base = writable
    visit(browser, screenshots, base + f"/topic?name={TOPIC}", "topics-topic-writable")
    page = submit(browser, "form.topic-partitions", count="5")
    snapshot(browser, screenshots, "topics-partitions-added")
    assert f"Topic {TOPIC} now has 5 partitions." in page
    assert _partitions(admin, TOPIC) == 5
    page = submit(browser, "form.topic-partitions", count="2")  # fewer: the broker refuses
    assert "Refused: INVALID_PARTITIONS" in page
    assert _partitions(admin, TOPIC) == 5


def test_delete_only_with_the_name_typed(writable, admin, browser, screenshots):
    _, base = writable
    browser.get(base + f"/topic?name={TOPIC}")
    page = submit(browser, "form.topic-delete", confirm="orders")
    assert "Not deleted: type the topic's name" in page
    assert _partitions(admin, TOPIC) == 5

    page = submit(browser, "form.topic-delete", confirm=TOPIC)
    snapshot(browser, screenshots, "topics-deleted")
    assert f"Deleted topic {TOPIC}." in page and "Create a topic" in page
    assert f"\n{TOPIC} " not in page
    eventually(lambda: _partitions(admin, TOPIC) is None, 10, "the topic gone")


def test_a_read_only_console_shows_no_form_and_refuses_changes(consoles, browser, screenshots):
    from selenium.webdriver.common.by import By

    process, base = consoles[1]
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    admin.create_topics([NewTopic("kept", 1, 1)])
    eventually(lambda: _partitions(admin, "kept") == 1, 10, "topic kept created")

    text = visit(browser, screenshots, base + "/topics", "topics-read-only")
    assert "kept" in text and "Create a topic" not in text
    assert browser.find_elements(By.CSS_SELECTOR, "form.topic-create") == []
    visit(browser, screenshots, base + "/topic?name=kept", "topics-topic-read-only")
    assert browser.find_elements(By.CSS_SELECTOR, "main form") == []
    visit(browser, screenshots, base + "/topic/configs?name=kept", "topics-configs-read-only")
    assert browser.find_elements(By.CSS_SELECTOR, "main form") == []

    for path in ("/topics/create", "/topic/delete", "/topic/partitions", "/topic/configs/set"):
        request = urllib.request.Request(base + path, data=b"name=kept&confirm=kept&count=4", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        refused.value.close()
        assert refused.value.code == 403
    assert _partitions(admin, "kept") == 1
