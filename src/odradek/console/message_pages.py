"""The console's messages: browse, search, tail, produce and export the records of a topic.

- `/messages?topic=&partition=&seek=start|end|offset|time&offset=&time=&limit=` browses one partition
  (or every partition when `partition` is blank) from the start, the last `limit` records, an offset
  or the first record at or after a time (ISO 8601, UTC; ListOffsets by timestamp); every partition's
  records are merged by timestamp and cut at `limit`. Keys, values and headers show as text when UTF-8,
  as hex otherwise.
- The same page searches with `key` (`key_match=exact|contains`), `value` (a substring), `header`
  (`name=value` or a name) and `json` (`a.b=value`, a dotted path into values that are JSON objects;
  a string leaf compares as text, any other leaf as its JSON): every filter given must match. A search
  scans at most MAX_SCAN records (from the end: the last MAX_SCAN of the topic) and says how many it
  scanned and whether it stopped before the end.
- `/messages/export?...&format=json|csv` downloads what the same query shows: JSON, a list of objects
  (bytes as UTF-8 text, or base64 with `*_base64` true), or CSV with a header row.
- `/messages/tail?topic=&partition=` is the live tail page; asked for `text/event-stream` (the page's
  EventSource, static/tail.js) it streams each record written after it opened as one JSON event,
  polling with Fetches that do not wait (the console lane is never held between polls) every
  POLL_S, for at most TAIL_MAX_RECORDS records or TAIL_MAX_S, then an `end` event.
- `POST /messages/produce` writes one record (topic, partition or the key's hash / a sticky partition,
  key, value, headers `name=value` per line) in one batch and flashes its partition and offset.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import asyncio
import base64
import csv
import datetime
import io
import json
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from odradek.client import KafkaClient, TopicPartition
from odradek.client.consumer import decode_range
from odradek.client.producer import Producer
from odradek.console.reader import ClusterReader
from odradek.console.web import CSP, FormError, NotFound, PageContext, page, required
from odradek.protocol.errors import ErrorCode, KafkaError, check

EARLIEST, LATEST = -2, -1
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
MAX_SCAN = 10_000
FETCH_BYTES = 1 << 20
POLL_S = 0.5
TAIL_MAX_RECORDS = 1000
TAIL_MAX_S = 600.0
KEEPALIVE_S = 10.0
SEEKS = (
    ("start", "the start"),
    ("end", "the end (last records)"),
    ("offset", "an offset"),
    ("time", "a time"),
)
QUERY_FIELDS = (
    "topic",
    "partition",
    "seek",
    "offset",
    "time",
    "limit",
    "key",
    "key_match",
    "value",
    "header",
    "json",
)
routes = web.RouteTableDef()


@dataclass(frozen=True, slots=True)
class Record:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Search:
    """The filters of a search; every one given must match."""

    key: bytes | None = None
    key_exact: bool = True
    value: bytes | None = None
    header: tuple[str, bytes | None] | None = None  # (name, value or None for any value)
    json_path: tuple[str, ...] | None = None
    json_value: str | None = None  # None: the path exists

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.key, self.value, self.header, self.json_path))

    def matches(self, record: Record) -> bool:
        if self.key is not None:
            if record.key is None:
                return False
            if not (record.key == self.key if self.key_exact else self.key in record.key):
                return False
        if self.value is not None and (record.value is None or self.value not in record.value):
            return False
        if self.header is not None:
            name, wanted = self.header
            if not any(k == name and (wanted is None or v == wanted) for k, v in record.headers):
                return False
        return self.json_path is None or self._json_matches(record.value)

    def _json_matches(self, value: bytes | None) -> bool:
        try:
            node: Any = json.loads(value or b"")
        except ValueError:
            return False
        assert self.json_path is not None
        for step in self.json_path:
            if not isinstance(node, dict) or step not in node:
                return False
            node = node[step]
        if self.json_value is None:
            return True
        return (node if isinstance(node, str) else json.dumps(node)) == self.json_value


@dataclass(frozen=True)
class Query:
    """What the browse form asks for."""

    topic: str
    partition: int | None  # None: every partition
    seek: str  # start | end | offset | time
    offset: int | None
    timestamp: int | None  # ms
    limit: int
    search: Search = field(default_factory=Search)


@dataclass(frozen=True)
class Found:
    records: list[Record]
    partitions: int  # how many partitions were read
    scanned: int
    stopped_early: bool  # the scan budget ran out before the end of a partition


# -- the form ---------------------------------------------------------------------------------------


def browse_form(query: dict[str, str]) -> Query:
    """The query of the browse form's values (FormError on a bad one)."""
    topic = required(query, "topic", "bad form value: a topic is needed", strip=True)
    try:
        partition_text = query.get("partition", "").strip()
        partition = None if partition_text in ("", "all") else _non_negative(partition_text, "partition")
        offset = _non_negative(query["offset"], "offset") if query.get("offset", "").strip() else None
        limit = max(1, min(int(query.get("limit") or DEFAULT_LIMIT), MAX_LIMIT))
        seek = query.get("seek") or "start"
        if seek == "start":  # the form's default: an offset or a time filled in says where from
            seek = "offset" if offset is not None else "time" if query.get("time") else "start"
        if seek not in dict(SEEKS):
            raise ValueError(f"unknown seek {seek!r}")
        if seek == "offset" and offset is None:
            raise ValueError("an offset is needed")
        timestamp = None
        if seek == "time":
            if not query.get("time"):
                raise ValueError("a time is needed")
            moment = datetime.datetime.fromisoformat(query["time"].strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            timestamp = int(moment.timestamp() * 1000)
        search = _search(query)
    except ValueError as exc:
        raise FormError(f"bad form value: {exc}") from None
    return Query(topic, partition, seek, offset if seek == "offset" else None, timestamp, limit, search)


def _non_negative(text: str, what: str) -> int:
    number = int(text)
    if number < 0:
        raise ValueError(f"{what} {number} is negative")
    return number


def _search(query: dict[str, str]) -> Search:
    key = query.get("key") or None
    value = query.get("value") or None
    header = None
    if query.get("header"):
        name, sep, wanted = query["header"].partition("=")
        header = (name.strip(), wanted.encode() if sep else None)
    json_path = json_value = None
    if query.get("json"):
        path, sep, wanted = query["json"].partition("=")
        steps = tuple(path.strip().split("."))
        if not all(steps):
            raise ValueError(f"bad JSON path {path!r}")
        json_path, json_value = steps, (wanted if sep else None)
    return Search(
        key=key.encode() if key is not None else None,
        key_exact=query.get("key_match", "exact") != "contains",
        value=value.encode() if value is not None else None,
        header=header,
        json_path=json_path,
        json_value=json_value,
    )


# -- reading (blocking: the console lane) -----------------------------------------------------------


def partitions_of(client: KafkaClient, topic: str) -> list[int]:
    """The partitions of `topic`; NotFound when there is no such topic."""
    meta = client.metadata([topic])
    partitions = sorted(p.partition for p in meta.partitions_of(topic))
    if not partitions:
        code = meta.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            check(code, f"topic {topic}")
        raise NotFound(f"There is no topic named {topic!r}.")
    return partitions


def topic_names(reader: ClusterReader) -> list[str]:
    """Every topic's name, for the forms' suggestions."""
    return sorted(reader.kafka().metadata(None).topics)


def find(reader: ClusterReader, query: Query) -> Found:
    """The records the query shows: see the module docstring."""
    client = reader.kafka()
    partitions = partitions_of(client, query.topic)
    if query.partition is not None:
        if query.partition not in partitions:
            raise NotFound(f"Topic {query.topic!r} has no partition {query.partition}.")
        partitions = [query.partition]
    tps = [TopicPartition(query.topic, p) for p in partitions]
    starts = client.list_offsets(dict.fromkeys(tps, EARLIEST))
    ends = client.list_offsets(dict.fromkeys(tps, LATEST))
    from_latest = query.seek == "end"
    if query.seek == "start":
        begins = dict(starts)
    elif query.seek == "end":
        window = query.limit if not query.search.active else max(1, MAX_SCAN // len(tps))
        begins = {tp: max(starts[tp], ends[tp] - window) for tp in tps}
    elif query.seek == "offset":
        assert query.offset is not None
        begins = {tp: max(starts[tp], query.offset) for tp in tps}
    else:
        assert query.timestamp is not None
        at = client.list_offsets(dict.fromkeys(tps, query.timestamp))
        begins = {tp: (at[tp] if at[tp] >= 0 else ends[tp]) for tp in tps}
    cursors = [_Cursor(tp, begins[tp], ends[tp], query.limit, from_latest) for tp in tps]
    scanned = 0
    while scanned < MAX_SCAN:
        live = [c for c in cursors if not c.done]
        if not live:
            break
        share = max(1, (MAX_SCAN - scanned) // len(live))  # no partition takes the whole budget
        for cursor in live:
            scanned += cursor.step(client, query.search, min(share, MAX_SCAN - scanned))
            if scanned >= MAX_SCAN:
                break
    stopped_early = any(not c.done for c in cursors)
    records = [r for c in cursors for r in c.kept]
    if len(tps) == 1:
        records.sort(key=lambda r: r.offset)
    else:
        records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    records = records[-query.limit :] if from_latest else records[: query.limit]
    return Found(records, len(tps), scanned, stopped_early)


class _Cursor:
    """One partition's scan from `position` up to `end` (the high watermark when the query began),
    keeping the first (or, `from_latest`, the last) `limit` matching records."""

    def __init__(self, tp: TopicPartition, position: int, end: int, limit: int, from_latest: bool) -> None:
        self.tp, self.position, self.end, self.limit, self.from_latest = tp, position, end, limit, from_latest
        self.kept: deque[Record] = deque(maxlen=limit if from_latest else None)
        self.exhausted = position >= end

    @property
    def done(self) -> bool:
        return self.exhausted or (not self.from_latest and len(self.kept) >= self.limit)

    def step(self, client: KafkaClient, search: Search, budget: int) -> int:
        """Fetch once and keep the matches; the number of records scanned (at most `budget`)."""
        records, next_offset, start = fetch_records(client, self.tp, self.position, self.end)
        if start > self.position:  # below the log start: go on from there
            self.position = start
            self.exhausted = self.position >= self.end
            return 0
        scanned = 0
        for record in records[:budget]:
            scanned += 1
            if search.matches(record):
                self.kept.append(record)
                if self.done:
                    break
        if scanned < len(records):
            next_offset = records[scanned - 1].offset + 1 if scanned else self.position
        if next_offset <= self.position:
            self.exhausted = True  # nothing more below the end (a gap, or compacted away)
        self.position = max(self.position, next_offset)
        if self.position >= self.end:
            self.exhausted = True
        return scanned


def fetch_records(
    client: KafkaClient, tp: TopicPartition, offset: int, end: int | None
) -> tuple[list[Record], int, int]:
    """One Fetch of `tp` from `offset` without waiting: the records below `end` (the high watermark
    when None), the offset after them, and the log start offset when `offset` was below it."""
    fetched = client.fetch(tp, offset, max_bytes=FETCH_BYTES, max_wait_ms=0)
    if fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and 0 <= offset < fetched.log_start_offset:
        return [], fetched.log_start_offset, fetched.log_start_offset
    if fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return [], offset, offset
    check(fetched.error_code, f"fetching {tp}")
    until = fetched.high_watermark if end is None else min(end, fetched.high_watermark)
    columns, next_offset = decode_range(fetched.records, offset, until)
    records = [
        Record(tp.partition, o, ts, k, v, tuple(h))
        for o, ts, k, v, h in zip(
            columns.offsets, columns.timestamps, columns.keys, columns.values, columns.headers, strict=True
        )
    ]
    return records, next_offset, offset


def tail_start(reader: ClusterReader, topic: str, partition: int | None) -> dict[TopicPartition, int]:
    """Where a tail starts: the end of each partition it follows."""
    client = reader.kafka()
    partitions = partitions_of(client, topic)
    if partition is not None:
        if partition not in partitions:
            raise NotFound(f"Topic {topic!r} has no partition {partition}.")
        partitions = [partition]
    return client.list_offsets({TopicPartition(topic, p): LATEST for p in partitions})


def tail_poll(
    reader: ClusterReader, positions: dict[TopicPartition, int], limit: int
) -> tuple[list[Record], dict[TopicPartition, int]]:
    """The records written since `positions` (up to `limit`, one Fetch per partition, none waiting),
    and the positions after them."""
    client = reader.kafka()
    found: list[Record] = []
    moved = dict(positions)
    for tp, offset in positions.items():
        if len(found) >= limit:
            break
        records, next_offset, _ = fetch_records(client, tp, offset, None)
        records = records[: limit - len(found)]
        found.extend(records)
        moved[tp] = records[-1].offset + 1 if records else max(offset, next_offset)
    found.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return found, moved


def produce_record(
    reader: ClusterReader,
    topic: str,
    partition: int | None,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
) -> tuple[int, int]:
    """Write one record in one batch; its (partition, offset)."""
    client = reader.kafka()
    partitions = partitions_of(client, topic)
    if partition is not None and partition not in partitions:
        raise NotFound(f"Topic {topic!r} has no partition {partition}.")
    producer = Producer(client)
    tp = producer.send(topic, value, key=key, headers=headers, partition=partition)
    return tp.partition, producer.flush()[tp]


# -- views ------------------------------------------------------------------------------------------


def text_or_base64(data: bytes | None) -> tuple[str | None, bool]:
    """(the bytes as UTF-8 text, False), or (base64, True) when they are not UTF-8; (None, False) for
    missing bytes."""
    if data is None:
        return None, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def as_json(record: Record) -> dict[str, Any]:
    """A record as JSON: bytes as text, or base64 with a `*_base64` flag."""
    key, key_b64 = text_or_base64(record.key)
    value, value_b64 = text_or_base64(record.value)
    headers = []
    for name, data in record.headers:
        text, b64 = text_or_base64(data)
        headers.append({"name": name, "value": text, "base64": b64})
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "time": _iso(record.timestamp),
        "key": key,
        "key_base64": key_b64,
        "value": value,
        "value_base64": value_b64,
        "headers": headers,
    }


CSV_COLUMNS = ("partition", "offset", "timestamp", "time", "key", "key_base64", "value", "value_base64")


def as_csv(records: list[Record]) -> str:
    """A header row, then one row per record (headers as a JSON list in the last column)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow((*CSV_COLUMNS, "headers"))
    for record in records:
        row = as_json(record)
        writer.writerow((*(_cell(row[c]) for c in CSV_COLUMNS), json.dumps(row["headers"])))
    return out.getvalue()


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")


def _query_string(form: dict[str, str], **extra: str) -> str:
    kept = {k: form[k] for k in QUERY_FIELDS if form.get(k)}
    return urlencode({**kept, **extra})


# -- pages ------------------------------------------------------------------------------------------


@routes.get("/messages")
async def messages(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = dict(request.query)
    found = None
    query = None
    if form.get("topic"):
        query = browse_form(form)
        found = await ctx.run(find, query)
    return ctx.render(
        "messages/browse.html",
        title="Messages",
        topics=await ctx.run(topic_names),
        form=form,
        seeks=SEEKS,
        query=query,
        found=found,
        max_scan=MAX_SCAN,
        export_json=_query_string(form, format="json"),
        export_csv=_query_string(form, format="csv"),
        tail=urlencode({k: form[k] for k in ("topic", "partition") if form.get(k)}),
    )


@routes.get("/messages/export")
async def export(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = dict(request.query)
    kind = form.get("format", "json")
    if kind not in ("json", "csv"):
        raise FormError(f"bad form value: unknown format {kind!r}")
    query = browse_form(form)
    found = await ctx.run(find, query)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in query.topic)
    if kind == "json":
        body = json.dumps([as_json(r) for r in found.records], indent=1)
        content_type = "application/json"
    else:
        body = as_csv(found.records)
        content_type = "text/csv"
    return web.Response(
        text=body,
        content_type=content_type,
        charset="utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}-messages.{kind}"'},
    )


@routes.get("/messages/tail")
async def tail(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    topic = request.query.get("topic", "").strip()
    partition_text = request.query.get("partition", "").strip()
    try:
        partition = None if partition_text in ("", "all") else _non_negative(partition_text, "partition")
    except ValueError as exc:
        raise FormError(f"bad form value: {exc}") from None
    streaming = "text/event-stream" in request.headers.get("Accept", "") or request.query.get("stream")
    if not topic:
        if streaming:
            raise FormError("bad form value: a topic is needed")
        return ctx.render(
            "messages/tail.html",
            title="Live tail",
            topics=await ctx.run(topic_names),
            topic="",
            partition=partition_text,
            url="",
        )
    positions = await ctx.run(tail_start, topic, partition)
    if not streaming:
        url = "/messages/tail?" + urlencode(
            {
                "topic": topic,
                **({"partition": str(partition)} if partition is not None else {}),
                "stream": "1",
            }
        )
        return ctx.render(
            "messages/tail.html",
            title=f"Live tail of {topic}",
            topics=await ctx.run(topic_names),
            topic=topic,
            partition=partition_text,
            url=url,
            max_records=TAIL_MAX_RECORDS,
            max_minutes=int(TAIL_MAX_S // 60),
        )
    return await _stream(ctx, positions)


async def _stream(ctx: PageContext, positions: dict[TopicPartition, int]) -> web.StreamResponse:
    """Server-sent events: `start`, one unnamed event per record, `end` with the reason."""
    request = ctx.request
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
        }
    )
    await response.prepare(request)
    started = last_write = time.monotonic()
    sent = 0
    reason = "limit"

    def gone() -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()

    try:
        await response.write(_event({"partitions": len(positions)}, "start"))
        while sent < TAIL_MAX_RECORDS:
            if time.monotonic() - started >= TAIL_MAX_S:
                reason = "time"
                break
            if gone():
                return response
            records, positions = await ctx.run(tail_poll, positions, TAIL_MAX_RECORDS - sent)
            for record in records:
                await response.write(_event(as_json(record)))
            sent += len(records)
            now = time.monotonic()
            if records:
                last_write = now
            elif now - last_write >= KEEPALIVE_S:
                await response.write(b": keepalive\n\n")
                last_write = now
            if sent < TAIL_MAX_RECORDS:
                await asyncio.sleep(POLL_S)
        await response.write(_event({"reason": reason, "records": sent}, "end"))
        await response.write_eof()
    except (ConnectionResetError, KafkaError, OSError) as exc:
        if not gone() and isinstance(exc, KafkaError):
            await response.write(_event({"reason": f"error: {exc}", "records": sent}, "end"))
    return response


def _event(data: object, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


@routes.post("/messages/produce")
async def produce(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    topic = required(form, "topic", "bad form value: a topic is needed", strip=True)
    try:
        text = str(form.get("partition", "")).strip()
        partition = _non_negative(text, "partition") if text else None
        headers = tuple(_headers(str(form.get("headers", ""))))
    except ValueError as exc:
        raise FormError(f"bad form value: {exc}") from None
    key_text = str(form.get("key", ""))
    key = key_text.encode() if key_text else None
    value = None if form.get("null_value") else str(form.get("value", "")).encode()
    back = "/messages"
    try:
        where, offset = await ctx.run(produce_record, topic, partition, key, value, headers)
    except KafkaError as exc:
        raise ctx.not_done(f"Refused: {exc}", back) from None
    except NotFound as exc:
        raise ctx.not_done(str(exc), back) from None
    ctx.flash("ok", f"Produced to {topic} partition {where} at offset {offset}.")
    raise ctx.redirect(
        "/messages?" + urlencode({"topic": topic, "partition": where, "seek": "offset", "offset": offset})
    )


def _headers(text: str) -> Iterator[tuple[str, bytes | None]]:
    """`name=value` per line (a bare name: a header without a value)."""
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not name.strip():
            raise ValueError(f"header line {line!r} has no name")
        yield name.strip(), (value.encode() if sep else None)
