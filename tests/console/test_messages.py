"""The console's messages in a real headless Chromium against one writable broker process: records
written by confluent_kafka over three partitions (keys, JSON values, headers, one binary value) are
browsed from the start and from a time, searched by key, value, header and JSON field, exported as
JSON and CSV; the live tail shows records written while it is open; a record produced from the page
is read back by a confluent_kafka consumer. The search filters and the export format are also checked
without a broker."""

from __future__ import annotations

import asyncio
import csv
import datetime
import io
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.producer import partition_for_key
from odradek.console import message_pages
from odradek.console.message_pages import Record, Search
from odradek.testing.cluster import eventually
from tests.console.browsing import snapshot, submit, visit

TOPIC, LIVE, INBOX = "events", "live", "inbox"
EARLY, LATE = range(6), range(6, 9)  # keyed JSON records; then one without key with binary bytes
BINARY = b"\xff\xfe binary"


def _value(i: int) -> bytes:
    return json.dumps(
        {"user": {"id": i, "tier": "gold" if i % 3 == 0 else "basic"}, "note": f"note {i}"}
    ).encode()


@pytest.fixture(scope="module")
def console(console_broker_at) -> Iterator[tuple[Any, str, int]]:
    """The broker, the console's URL, and the time (ms) between the early and the late records."""
    process, base = console_broker_at(**{"console.read.only": "false"})
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topics = [NewTopic(TOPIC, 3, 1), NewTopic(LIVE, 2, 1), NewTopic(INBOX, 2, 1)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    now = int(time.time() * 1000)
    early, late = now - 120_000, now - 60_000
    producer = Producer({"bootstrap.servers": process.bootstrap})
    for i in [*EARLY, *LATE]:
        headers = [("source", b"web" if i % 2 == 0 else b"app")] + ([("trace", b"t-7")] if i == 7 else [])
        at = (early if i in EARLY else late) + i
        producer.produce(
            TOPIC, key=f"user-{i}", value=_value(i), headers=headers, partition=i % 3, timestamp=at
        )
    producer.produce(TOPIC, value=BINARY, partition=0, timestamp=late + 100)
    assert producer.flush(30) == 0
    yield process, base, now - 90_000


def _rows(browser: Any) -> list[list[str]]:
    """The cells of the records table (partition, offset, timestamp, key, value, headers)."""
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('#records tr')).slice(1)"
        ".map(r => Array.from(r.cells).map(c => c.innerText))"
    )


def _keys(browser: Any, screenshots: Any, base: str, name: str, **query: str) -> list[str]:
    visit(browser, screenshots, f"{base}/messages?{urlencode({'topic': TOPIC, **query})}", name)
    return [row[3] for row in _rows(browser)]


def _get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.headers.get("Content-Disposition", ""), response.read().decode()


def test_browse_every_partition_from_the_start_and_from_a_time(console, browser, screenshots):
    process, base, cut = console
    text = visit(browser, screenshots, f"{base}/messages?topic={TOPIC}", "messages-browse")
    assert "10 records (3 partitions merged by time)" in text
    rows = _rows(browser)
    # merged by timestamp across the partitions
    assert [r[3] for r in rows] == [f"user-{i}" for i in [*EARLY, *LATE]] + ["null"]
    assert [r[0] for r in rows[:4]] == ["0", "1", "2", "0"]
    assert rows[0][4] == _value(0).decode() and rows[0][5] == "source: web"
    assert rows[-1][4] == "0x" + BINARY.hex()
    suggested = browser.execute_script(
        "return Array.from(document.querySelectorAll('#topic-names option')).map(o => o.value)"
    )
    assert {TOPIC, LIVE, INBOX} <= set(suggested)

    since = datetime.datetime.fromtimestamp(cut / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    keys = _keys(browser, screenshots, base, "messages-since", seek="time", time=since)
    assert keys == [f"user-{i}" for i in LATE] + ["null"]

    # one partition, the last two of it
    assert _keys(browser, screenshots, base, "messages-end", partition="0", seek="end", limit="2") == [
        "user-6",
        "null",
    ]
    assert _keys(browser, screenshots, base, "messages-offset", partition="1", offset="1") == [
        "user-4",
        "user-7",
    ]
    # the form itself (its "from the start" default sent with an offset filled in: the offset wins)
    visit(browser, screenshots, f"{base}/messages", "messages-empty")
    text = submit(browser, "#browse", topic=TOPIC, partition="1", offset="2", key="user-7")
    assert "1 records matching, 1 scanned (partition 1)" in text
    assert [r[3] for r in _rows(browser)] == ["user-7"]


def test_search_by_key_value_header_and_json_field(console, browser, screenshots):
    _, base, _ = console
    assert _keys(browser, screenshots, base, "messages-search-key", key="user-4") == ["user-4"]
    assert _keys(browser, screenshots, base, "messages-search-key-part", key="er-", key_match="contains") == [
        f"user-{i}" for i in [*EARLY, *LATE]
    ]
    assert _keys(browser, screenshots, base, "messages-search-value", value="note 7") == ["user-7"]
    assert _keys(browser, screenshots, base, "messages-search-header", header="source=app") == [
        "user-1",
        "user-3",
        "user-5",
        "user-7",
    ]
    assert _keys(browser, screenshots, base, "messages-search-header-name", header="trace") == ["user-7"]
    assert _keys(browser, screenshots, base, "messages-search-json", json="user.tier=gold") == [
        "user-0",
        "user-3",
        "user-6",
    ]
    text = visit(browser, screenshots, f"{base}/messages?topic={TOPIC}&json=user.id%3D5", "messages-search")
    assert "1 records matching, 10 scanned" in text and "stopped" not in text
    assert [r[3] for r in _rows(browser)] == ["user-5"]


def test_export_as_json_and_csv_is_what_the_page_shows(console, browser, screenshots):
    _, base, _ = console
    query = f"topic={TOPIC}&header=source"
    visit(browser, screenshots, f"{base}/messages?{query}", "messages-export")
    shown = [(int(r[0]), int(r[1]), r[3]) for r in _rows(browser)]
    assert len(shown) == 9

    disposition, body = _get(f"{base}/messages/export?{query}&format=json")
    assert disposition == f'attachment; filename="{TOPIC}-messages.json"'
    exported = json.loads(body)
    assert [(r["partition"], r["offset"], r["key"]) for r in exported] == shown
    assert exported[0]["value"] == _value(0).decode() and exported[0]["value_base64"] is False
    assert exported[0]["headers"] == [{"name": "source", "value": "web", "base64": False}]

    disposition, body = _get(f"{base}/messages/export?topic={TOPIC}&format=csv")
    assert disposition.startswith("attachment;")
    table = list(csv.reader(io.StringIO(body)))
    assert table[0] == [*message_pages.CSV_COLUMNS, "headers"]
    assert len(table) == 1 + 10
    binary = table[-1]
    assert binary[4] == "" and binary[6] == "//4gYmluYXJ5" and binary[7] == "true"  # base64 of BINARY


def test_the_live_tail_shows_records_written_after_it_opened(console, browser, screenshots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    process, base, _ = console
    producer = Producer({"bootstrap.servers": process.bootstrap})
    producer.produce(LIVE, key=b"before", value=b"old", partition=0)
    assert producer.flush(30) == 0
    visit(browser, screenshots, f"{base}/messages/tail?topic={LIVE}", "messages-tail-open")
    status = browser.find_element(By.ID, "tail-status")
    WebDriverWait(browser, 20).until(lambda _: status.text.startswith("following"))
    producer.produce(LIVE, key=b"new-1", value=b"first", partition=0, headers=[("h", b"v")])
    producer.produce(LIVE, key=b"new-2", value=b"\xff\x01", partition=1)
    assert producer.flush(30) == 0

    def tail_rows() -> list[list[str]]:
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#tail tbody tr'))"
            ".map(r => Array.from(r.cells).map(c => c.innerText))"
        )

    WebDriverWait(browser, 20).until(lambda _: len(tail_rows()) >= 2)
    rows = sorted(tail_rows(), key=lambda r: r[3])
    snapshot(browser, screenshots, "messages-tail")
    assert [(r[0], r[3], r[4], r[5]) for r in rows] == [
        ("0", "new-1", "first", "h: v"),
        ("1", "new-2", "0xff01", ""),
    ]
    assert "before" not in browser.find_element(By.ID, "tail").text  # it starts at the end
    browser.find_element(By.ID, "tail-stop").click()
    assert status.text == "stopped (2 records)"


def test_produce_from_the_page_is_read_by_a_consumer(console, browser, screenshots):
    process, base, _ = console
    visit(browser, screenshots, f"{base}/messages?topic={INBOX}", "messages-produce-form")
    text = submit(
        browser,
        "#produce",
        topic=INBOX,
        partition="1",
        key="k-ui",
        value='{"hello": "console"}',
        headers="origin=ui\nflag",
    )
    found = re.search(rf"Produced to {INBOX} partition 1 at offset (\d+)\.", text)
    assert found, text
    offset = int(found.group(1))
    snapshot(browser, screenshots, "messages-produce")
    assert [r[3] for r in _rows(browser)] == ["k-ui"]

    consumer = Consumer(
        {"bootstrap.servers": process.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(INBOX, 1, offset)])
    try:
        message = eventually(lambda: consumer.poll(0.5), 20, "the produced record")
    finally:
        consumer.close()
    assert message.error() is None and message.offset() == offset
    assert (message.key(), message.value()) == (b"k-ui", b'{"hello": "console"}')
    assert message.headers() == [("origin", b"ui"), ("flag", None)]

    # without a partition: the key's hash chooses, as Kafka's default partitioner
    visit(browser, screenshots, f"{base}/messages?topic={INBOX}", "messages-produce-form")
    text = submit(browser, "#produce", key="by-hash", null_value="on")
    found = re.search(rf"Produced to {INBOX} partition (\d) at offset (\d+)\.", text)
    assert found and int(found.group(1)) == partition_for_key(b"by-hash", 2), text
    _, body = _get(f"{base}/messages/export?topic={INBOX}&partition={found.group(1)}&offset={found.group(2)}")
    assert [(r["key"], r["value"]) for r in json.loads(body)] == [("by-hash", None)]  # a tombstone

    text = submit(browser, "#produce", topic="no-such-topic", value="v")
    assert "There is no topic named 'no-such-topic'." in text
    assert _status(f"{base}/messages?topic=no-such-topic") == 404  # and producing did not create it


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code


def test_bad_form_values_answer_400(console, browser, screenshots):
    _, base, _ = console
    for query in ("partition=x", "seek=offset", "seek=sideways", "time=yesterday", "json=a..b"):
        assert _status(f"{base}/messages?topic={TOPIC}&{query}") == 400, query
    assert _status(f"{base}/messages/export?topic={TOPIC}&format=xml") == 400
    assert _status(f"{base}/messages/tail?topic={TOPIC}&partition=-1") == 400
    assert _status(f"{base}/messages?topic=nothing-here") == 404
    assert _status(f"{base}/messages/tail?topic={TOPIC}&partition=7") == 404
    assert _status(f"{base}/messages/tail") == 200  # the form alone
    text = visit(browser, screenshots, f"{base}/messages?topic={TOPIC}&offset=-1", "messages-bad-form")
    assert "Bad request" in text and "negative" in text


def _record(
    key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes | None], ...] = ()
) -> Record:
    return Record(0, 0, 0, key, value, headers)


def test_search_filters_without_a_broker():
    doc = _record(b"user-1", b'{"a": {"b": 3, "c": "x"}, "n": null}', (("h", b"1"), ("empty", None)))
    assert Search(key=b"user-1").matches(doc) and not Search(key=b"user").matches(doc)
    assert Search(key=b"ser", key_exact=False).matches(doc)
    assert not Search(key=b"u").matches(_record(None, b""))
    assert Search(header=("h", b"1")).matches(doc) and not Search(header=("h", b"2")).matches(doc)
    assert Search(header=("empty", None)).matches(doc)
    assert Search(json_path=("a", "b"), json_value="3").matches(doc)
    assert Search(json_path=("a", "c"), json_value="x").matches(doc)
    assert Search(json_path=("n",), json_value="null").matches(doc)
    assert Search(json_path=("a", "b")).matches(doc) and not Search(json_path=("a", "z")).matches(doc)
    assert not Search(json_path=("a",), json_value="3").matches(_record(None, b"[1, 2]"))
    assert not Search(json_path=("a",)).matches(_record(None, b"\xff not json"))
    assert not Search().active and Search(value=b"x").active


def test_export_rows_say_which_bytes_are_base64():
    row = message_pages.as_json(_record(b"k", b"\xff\x00", (("h", None),)))
    assert (row["key"], row["key_base64"], row["value"], row["value_base64"]) == ("k", False, "/wA=", True)
    assert row["headers"] == [{"name": "h", "value": None, "base64": False}]
    assert row["time"] == "1970-01-01T00:00:00.000+00:00"


class _Lane:
    """A stand-in for a page's context: `run` calls the (patched) tail poll, counting the calls."""

    def __init__(self, request: Any) -> None:
        self.request = request
        self.polls = 0

    async def run(self, call: Any, *args: Any) -> Any:
        self.polls += 1
        return call(None, *args)


def _tail_server(lanes: list[_Lane], finished: asyncio.Event) -> Any:
    from aiohttp import web

    async def handler(request: web.Request) -> web.StreamResponse:
        lane = _Lane(request)
        lanes.append(lane)
        try:
            return await message_pages._stream(lane, {TopicPartition(LIVE, 0): 0})  # type: ignore[arg-type]
        finally:
            finished.set()

    app = web.Application()
    app.router.add_get("/tail", handler)
    return app


def _events(body: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        found.append((lines.get("event", "message"), json.loads(lines["data"])))
    return found


def _one_record_per_poll(reader: None, positions: dict[Any, int], limit: int) -> tuple[list[Record], dict]:
    ((tp, offset),) = positions.items()
    return [Record(tp.partition, offset, 0, b"k", b"v", ())], {tp: offset + 1}


def test_the_tail_stream_ends_at_its_bounds_and_when_the_client_leaves(monkeypatch):
    from aiohttp import ClientSession
    from aiohttp.test_utils import TestServer

    monkeypatch.setattr(message_pages, "POLL_S", 0.01)
    monkeypatch.setattr(message_pages, "TAIL_MAX_RECORDS", 3)
    monkeypatch.setattr(message_pages, "tail_poll", _one_record_per_poll)

    async def scenario() -> None:
        lanes: list[_Lane] = []
        finished = asyncio.Event()
        async with TestServer(_tail_server(lanes, finished)) as server, ClientSession() as session:
            async with session.get(server.make_url("/tail")) as response:
                assert response.headers["Content-Type"] == "text/event-stream"
                events = _events(await response.text())
            assert [name for name, _ in events] == ["start", "message", "message", "message", "end"]
            assert [data["offset"] for _, data in events[1:4]] == [0, 1, 2]
            assert events[-1][1] == {"reason": "limit", "records": 3}

            # the time bound, with nothing written
            monkeypatch.setattr(message_pages, "TAIL_MAX_S", 0.2)
            monkeypatch.setattr(message_pages, "tail_poll", lambda reader, positions, limit: ([], positions))
            async with session.get(server.make_url("/tail")) as response:
                assert _events(await response.text())[-1] == ("end", {"reason": "time", "records": 0})

            # the client leaves: the stream stops polling
            monkeypatch.setattr(message_pages, "TAIL_MAX_S", 600.0)
            finished.clear()
            async with session.get(server.make_url("/tail")) as response:
                await response.content.readline()
                response.close()
            await asyncio.wait_for(finished.wait(), 5)
            polls = lanes[-1].polls
            await asyncio.sleep(0.1)
            assert lanes[-1].polls == polls

    asyncio.run(scenario())
