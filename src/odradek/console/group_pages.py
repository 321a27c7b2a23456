"""The console's group pages: the group list (`/groups`: each group's type (Classic, Consumer, Share),
state, member count and total lag), a consumer group's page (`/group?id=`: members, assignments, lag
per partition and the chart of its total lag) and a share group's page (the same path: state, epochs,
members with their assigned partitions, each share-partition's start offset and lag), and the
actions on a group:

- `/group/reset` (GET) previews an offset reset of a consumer group as kafka-consumer-groups
  --reset-offsets computes it: scope every topic the group has offsets for (or members assigned),
  one topic or one partition; target earliest, latest, an offset (clamped into the log) or a time
  (ListOffsets by timestamp, the log end where no record is that late); a table of partition,
  current and new offset. POST `/group/reset` commits the previewed offsets as the tool's
  --execute does (OffsetCommit as the group, generation -1, no member): the coordinator refuses
  it while the group has members, and its error is flashed.
- The same path with `share=1` previews a share group's start offsets reset as kafka-share-groups
  --reset-offsets computes them (every topic with state or one topic; earliest, latest or a time),
  and its POST sets them (AlterShareGroupOffsets; NON_EMPTY_GROUP, flashed, while it has members).
- POST `/group/delete` deletes a group (DeleteGroups) once its id is typed again to confirm; the
  coordinator refuses a group with members (NON_EMPTY_GROUP, flashed).
- POST `/group/delete-offsets` deletes a consumer group's committed offsets of one topic
  (OffsetDelete; refused while a member is subscribed to the topic).
In read-only mode no form is shown (and the console refuses every POST).

Owns the lag history: once a group page or the list has been viewed, a periodic job of the scheduler
("console-lag-sample") samples each group's total lag and each of its partitions' lag every SAMPLE_S
with the console's own reader, and WINDOW_S of samples are kept (a group page adds a sample of its
own); the group page charts the total and draws each partition's as a small line beside its lag.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

import collections
import datetime
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from odradek.client import TopicPartition
from odradek.client.group_admin import GroupReport, ResetTarget
from odradek.client.share_admin import ShareAdmin, ShareGroupReport, StartOffset
from odradek.console.reader import ClusterReader
from odradek.console.web import CONSOLE_KEY, FormError, NotFound, console_of, page, required
from odradek.protocol.errors import ErrorCode, KafkaError, check, error_name
from odradek.scheduler import Job, Scheduler

log = logging.getLogger(__name__)

SAMPLE_S = 5.0
WINDOW_S = 600.0
ADMIN_TIMEOUT_S = 10.0
EARLIEST, LATEST = -2, -1
SCOPES = ("all", "topic", "partition")
TARGETS = ("earliest", "latest", "offset", "time")
routes = web.RouteTableDef()
HISTORY_KEY = web.AppKey("lag_history", object)


@dataclass(frozen=True)
class GroupSummary:
    """A group as the list shows it; members and lag are None when the group could not be described."""

    group_id: str
    group_type: str  # classic, consumer or share
    state: str
    members: int | None
    lag: int | None
    partition_lags: dict[TopicPartition, int]


@dataclass(frozen=True)
class ShareView:
    report: ShareGroupReport
    offsets: list[StartOffset]

    @property
    def lag(self) -> int:
        return share_lag(self.offsets)


@dataclass(frozen=True)
class ResetRow:
    tp: TopicPartition
    current: int | None  # the committed offset, None when the group has none
    new: int


@dataclass(frozen=True)
class ResetPlan:
    group_id: str
    state: str
    members: int
    rows: list[ResetRow]
    notes: list[str]  # offsets moved into the log, as Kafka's tool says


Samples = collections.deque[tuple[float, int]]


class LagHistory:
    """Each group's (time, total lag) samples over the last WINDOW_S, and each of its partitions'."""

    def __init__(self) -> None:
        self.samples: dict[str, Samples] = {}
        self.by_partition: dict[str, dict[TopicPartition, Samples]] = {}
        self._job: Job | None = None

    def start(self, scheduler: Scheduler, reader: ClusterReader, run: Any) -> None:
        """Sample every SAMPLE_S from now on (once)."""
        if self._job is None:

            async def sample() -> None:
                try:
                    for summary in await run(reader, summaries):
                        if summary.lag is not None:
                            self.record(summary.group_id, summary.lag, summary.partition_lags)
                except Exception as exc:
                    log.info("Console lag sample failed: %r", exc)

            self._job = scheduler.every(
                "console-lag-sample", round(SAMPLE_S * 1000), sample, initial_delay_ms=0
            )

    def record(self, group_id: str, lag: int, partitions: Mapping[TopicPartition, int]) -> None:
        """A sample of the group's total lag and of its partitions' lags, now."""
        now = time.time()
        _append(self.samples.setdefault(group_id, collections.deque()), now, lag)
        by_partition = self.by_partition.setdefault(group_id, {})
        for tp, partition_lag in partitions.items():
            by_partition.setdefault(tp, collections.deque()).append((now, partition_lag))
        for tp, history in list(by_partition.items()):
            _trim(history, now)
            if not history:
                del by_partition[tp]

    def partitions(self, group_id: str) -> dict[TopicPartition, list[tuple[float, int]]]:
        return {tp: list(history) for tp, history in self.by_partition.get(group_id, {}).items()}

    def latest(self, group_id: str) -> int | None:
        history = self.samples.get(group_id)
        return history[-1][1] if history else None

    async def stop(self, scheduler: Scheduler) -> None:
        await scheduler.cancel(self._job)


def _append(history: Samples, now: float, lag: int) -> None:
    history.append((now, lag))
    _trim(history, now)


def _trim(history: Samples, now: float) -> None:
    while history and history[0][0] < now - WINDOW_S:
        history.popleft()


def setup(app: web.Application) -> None:
    app[HISTORY_KEY] = LagHistory()

    async def stop(app: web.Application) -> None:
        history = app[HISTORY_KEY]
        assert isinstance(history, LagHistory)
        await history.stop(app[CONSOLE_KEY].scheduler)  # type: ignore[attr-defined]

    app.on_cleanup.append(stop)


def total_lag(report: Any) -> int:
    return sum(row.lag for row in report.rows if row.lag is not None)


def partition_lags(report: Any) -> dict[TopicPartition, int]:
    return {row.tp: row.lag for row in report.rows if row.tp is not None and row.lag is not None}


def share_partition_lags(offsets: Sequence[StartOffset]) -> dict[TopicPartition, int]:
    return {o.tp: o.lag for o in offsets if o.lag >= 0}


def share_lag(offsets: Sequence[StartOffset]) -> int:
    return sum(o.lag for o in offsets if o.lag >= 0)


# -- blocking reads and actions (run in the console lane) ------------------------------------------


def _share_admin(reader: ClusterReader) -> ShareAdmin:
    return ShareAdmin(reader.kafka(), ADMIN_TIMEOUT_S)


def summaries(reader: ClusterReader) -> list[GroupSummary]:
    """Every group with its type, state, member count and total lag (share groups: the sum of their
    share-partitions' lag)."""
    admin = reader.group_admin()
    listed = []
    for g in admin.list_groups():
        members: int | None = None
        lag: int | None = None
        lags: dict[TopicPartition, int] = {}
        try:
            if g.group_type == "share":
                view = share_group(reader, g.group_id)
                members, lag, lags = len(view.report.members), view.lag, share_partition_lags(view.offsets)
            else:
                report = admin.describe(g.group_id)
                members, lag, lags = len(report.members), total_lag(report), partition_lags(report)
        except KafkaError as exc:  # e.g. not allowed to describe it: listed without numbers
            log.debug("Console could not describe group %r: %r", g.group_id, exc)
        listed.append(GroupSummary(g.group_id, g.group_type, g.state, members, lag, lags))
    return listed


def group_type(reader: ClusterReader, group_id: str) -> str | None:
    """The listed group's type (classic, consumer, share), None when it is not listed."""
    return next((g.group_type for g in reader.group_admin().list_groups() if g.group_id == group_id), None)


def share_group(reader: ClusterReader, group_id: str) -> ShareView:
    admin = _share_admin(reader)
    return ShareView(admin.describe_share(group_id), admin.start_offsets(group_id))


def plan_reset(
    reader: ClusterReader, group_id: str, scope: str, topic: str, partition: int, target: ResetTarget
) -> ResetPlan:
    """The new offsets of a reset, computed as kafka-consumer-groups --reset-offsets --dry-run does."""
    admin = reader.group_admin()
    report = admin.describe(group_id)
    if scope == "all":
        topics = sorted(
            {tp.topic for tp in report.committed} | {tp.topic for m in report.members for tp in m.partitions}
        )
        tps = [tp for t in topics for tp in admin.partitions(t, None)]
    else:
        tps = admin.partitions(topic, None)
        if scope == "partition":
            if not 0 <= partition < len(tps):
                raise FormError(f"topic {topic!r} has no partition {partition}")
            tps = [TopicPartition(topic, partition)]
    notes: list[str] = []
    if not tps:
        planned: dict[TopicPartition, int] = {}
    elif target.kind == "offset":
        planned = _clamped(reader, tps, target.value, notes)
    else:
        planned = admin.plan_reset(tps, target, report.committed, lambda _n: None)
    rows = [ResetRow(tp, report.committed.get(tp), planned[tp]) for tp in sorted(planned)]
    return ResetPlan(group_id, report.state, len(report.members), rows, notes)


def plan_share_reset(reader: ClusterReader, group_id: str, topic: str, target: ResetTarget) -> ResetPlan:
    """A share group's new start offsets, as kafka-share-groups --reset-offsets --dry-run computes them:
    every topic the group has state for (or `topic`), to earliest, latest or a time."""
    admin = _share_admin(reader)
    report = admin.describe_share(group_id)
    current = {o.tp: o.start_offset for o in admin.start_offsets(group_id) if o.start_offset >= 0}
    topics = [topic] if topic else sorted({tp.topic for tp in current})
    tps = [tp for t in topics for tp in admin.partitions(t, None)]
    planned: dict[TopicPartition, int] = {}
    if tps and target.kind == "time":
        found, latest = admin.log_offsets(tps, target.value), admin.log_offsets(tps, LATEST)
        planned = {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in tps}
    elif tps:
        planned = admin.log_offsets(tps, EARLIEST if target.kind == "earliest" else LATEST)
    rows = [ResetRow(tp, current.get(tp), planned[tp]) for tp in sorted(planned)]
    return ResetPlan(group_id, report.state, len(report.members), rows, [])


def commit_share_offsets(reader: ClusterReader, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """AlterShareGroupOffsets; KafkaError with the coordinator's error when it refuses (a group with
    members: NON_EMPTY_GROUP) or fails any partition."""
    error, message, errors = _share_admin(reader).alter_start_offsets(group_id, offsets)
    check(error, message)
    failed = {tp: c for tp, c in errors.items() if c != ErrorCode.NONE}
    if failed:
        details = ", ".join(f"{tp.topic}-{tp.partition}: {error_name(c)}" for tp, c in sorted(failed.items()))
        raise KafkaError(next(iter(failed.values())), f"start offsets not set ({details})")


def _clamped(
    reader: ClusterReader, tps: Sequence[TopicPartition], offset: int, notes: list[str]
) -> dict[TopicPartition, int]:
    """`offset` for each partition, moved into [earliest, latest] with Kafka's notice."""
    client = reader.kafka()
    earliest = client.list_offsets(dict.fromkeys(tps, EARLIEST))
    latest = client.list_offsets(dict.fromkeys(tps, LATEST))
    planned = {}
    for tp in tps:
        name = f"{tp.topic}-{tp.partition}"
        if offset < earliest[tp]:
            notes.append(
                f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
                f"Value will be set to {earliest[tp]}"
            )
        elif offset > latest[tp]:
            notes.append(
                f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
                f"Value will be set to {latest[tp]}"
            )
        planned[tp] = min(max(offset, earliest[tp]), latest[tp])
    return planned


def commit_offsets(reader: ClusterReader, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit `offsets` for the group as kafka-consumer-groups --execute does (no member, generation
    -1); KafkaError with the coordinator's error when it refuses any partition."""
    admin = reader.group_admin()
    failed = {tp: code for tp, code in admin.commit(group_id, offsets).items() if code != ErrorCode.NONE}
    if failed:
        report = admin.describe(group_id)
        details = ", ".join(f"{tp.topic}-{tp.partition}: {error_name(c)}" for tp, c in sorted(failed.items()))
        raise KafkaError(
            next(iter(failed.values())),
            f"the coordinator did not commit the new offsets ({details}); the group is {report.state} "
            f"with {len(report.members)} member(s), and offsets can be reset only while it has none",
        )


def delete_group(reader: ClusterReader, group_id: str) -> None:
    code = reader.group_admin().delete(group_id)
    if code == ErrorCode.NON_EMPTY_GROUP:
        raise KafkaError(code, f"group '{group_id}' has members: it can be deleted once it is empty")
    check(code, f"group '{group_id}' could not be deleted")


def delete_topic_offsets(reader: ClusterReader, group_id: str, topic: str) -> None:
    """OffsetDelete of every committed offset of `topic` in the group."""
    admin = reader.group_admin()
    tps = sorted(tp for tp in admin.describe(group_id).committed if tp.topic == topic)
    if not tps:
        raise FormError(f"group {group_id!r} has no committed offsets of topic {topic!r}")
    code, errors = admin.delete_offsets(group_id, tps)
    check(code, f"the offsets of '{group_id}' could not be deleted")
    failed = {tp: c for tp, c in errors.items() if c != ErrorCode.NONE}
    if failed:
        details = ", ".join(f"{tp.topic}-{tp.partition}: {error_name(c)}" for tp, c in sorted(failed.items()))
        raise KafkaError(next(iter(failed.values())), f"the offsets were kept ({details})")


# -- pages ---------------------------------------------------------------------------------------


def _history(request: web.Request) -> LagHistory:
    history = request.app[HISTORY_KEY]
    assert isinstance(history, LagHistory)
    console = console_of(request)
    history.start(console.scheduler, console.sessions.service, console.sessions.run)
    return history


def _group_id(values: Any) -> str:
    return required(values, "id", "a group id is needed: /group?id=<group id>")


def _group_path(group_id: str) -> str:
    return "/group?" + urlencode({"id": group_id})


@routes.get("/groups")
async def groups(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    history = _history(request)
    listed = await ctx.run(summaries)
    for summary in listed:
        if summary.lag is not None:
            history.record(summary.group_id, summary.lag, summary.partition_lags)
    return ctx.render("groups/list.html", title="Consumer groups", groups=listed)


@routes.get("/group")
async def group(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    group_id = _group_id(request.query)
    history = _history(request)
    if await ctx.run(group_type, group_id) == "share":
        view = await ctx.run(share_group, group_id)
        history.record(group_id, view.lag, share_partition_lags(view.offsets))
        return ctx.render(
            "groups/share.html",
            title=f"Share group {group_id}",
            report=view.report,
            offsets=view.offsets,
            members=sorted(view.report.members, key=lambda m: m.member_id),
            history=list(history.samples[group_id]),
            partition_history=history.partitions(group_id),
        )
    report = await ctx.run(ClusterReader.group, group_id)
    if report.state == "Dead" and not report.members and not report.committed:
        raise NotFound(f"There is no consumer group named {group_id!r}.")
    history.record(group_id, total_lag(report), partition_lags(report))
    members = sorted(report.members, key=lambda m: m.member_id)
    return ctx.render(
        "groups/group.html",
        title=f"Consumer group {group_id}",
        report=report,
        members=members,
        topics=_topics(report),
        history=list(history.samples[group_id]),
        partition_history=history.partitions(group_id),
    )


def _topics(report: GroupReport) -> list[str]:
    return sorted(
        {tp.topic for tp in report.committed} | {tp.topic for m in report.members for tp in m.partitions}
    )


def _int(values: Any, name: str, default: int | None = None) -> int:
    text = str(values.get(name, "")).strip()
    if not text and default is not None:
        return default
    try:
        return int(text)
    except ValueError:
        raise FormError(f"{name} must be a whole number, not {text!r}") from None


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date and time (UTC unless it names a zone)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise FormError(f"a time is YYYY-MM-DDTHH:MM:SS[.sss] (UTC) or milliseconds, not {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _target(values: Any) -> ResetTarget:
    kind = str(values.get("target", ""))
    if kind not in TARGETS:
        raise FormError(f"the target is one of {', '.join(TARGETS)}")
    if kind == "offset":
        return ResetTarget("offset", _int(values, "offset"))
    if kind == "time":
        return ResetTarget("time", parse_time(str(values.get("time", ""))))
    return ResetTarget(kind)


@routes.get("/group/reset")
async def reset_preview(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    values = request.query
    group_id = _group_id(values)
    if values.get("share"):
        target = _target(values)
        if target.kind == "offset":
            raise FormError("a share group's start offsets are reset to earliest, latest or a time")
        topic = values.get("topic", "")
        share_plan = await ctx.run(plan_share_reset, group_id, topic, target)
        return ctx.render(
            "groups/reset.html",
            title=f"Reset start offsets of share group {group_id}",
            plan=share_plan,
            target=target,
            scope="topic" if topic else "all",
            topic=topic,
            partition=0,
            share=True,
        )
    scope = values.get("scope", "all")
    if scope not in SCOPES:
        raise FormError(f"the scope is one of {', '.join(SCOPES)}")
    topic = values.get("topic", "")
    if scope != "all" and not topic:
        raise FormError("a topic is needed for this scope")
    target = _target(values)
    partition = _int(values, "partition", 0) if scope == "partition" else 0
    plan = await ctx.run(plan_reset, group_id, scope, topic, partition, target)
    return ctx.render(
        "groups/reset.html",
        title=f"Reset offsets of {group_id}",
        plan=plan,
        target=target,
        scope=scope,
        topic=topic,
        partition=partition,
        share=False,
    )


def _planned(values: Any) -> dict[TopicPartition, int]:
    """The previewed offsets the execute form carries, `topic:partition:offset` each."""
    planned = {}
    for value in values.getall("planned", []):
        topic, partition, offset = (str(value).rsplit(":", 2) + ["", ""])[:3]
        try:
            planned[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            raise FormError(f"bad planned offset {value!r}") from None
        if not topic or int(partition) < 0 or int(offset) < 0:
            raise FormError(f"bad planned offset {value!r}")
    if not planned:
        raise FormError("no offsets to commit")
    return planned


@routes.post("/group/reset")
async def reset_execute(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    group_id = _group_id(form)
    planned = _planned(form)
    share = bool(form.get("share"))
    await ctx.attempt(
        f"{'Start offsets of share' if share else 'Offsets of'} group '{group_id}' reset: "
        + ", ".join(f"{tp.topic}-{tp.partition} to {o}" for tp, o in sorted(planned.items())),
        commit_share_offsets if share else commit_offsets,
        group_id,
        planned,
    )
    raise ctx.redirect(_group_path(group_id))


@routes.post("/group/delete")
async def delete(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    group_id = _group_id(form)
    if str(form.get("confirm", "")) != group_id:
        raise ctx.not_done(f"Not deleted: type the group id ({group_id}) to confirm.", _group_path(group_id))
    raise await ctx.attempt_redirect(
        f"Group '{group_id}' deleted.",
        delete_group,
        group_id,
        success="/groups",
        failure=_group_path(group_id),
    )


@routes.post("/group/delete-offsets")
async def delete_offsets(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    group_id = _group_id(form)
    topic = required(form, "topic", "a topic is needed")
    await ctx.attempt(
        f"Committed offsets of topic '{topic}' deleted from group '{group_id}'.",
        delete_topic_offsets,
        group_id,
        topic,
    )
    raise ctx.redirect(_group_path(group_id))
