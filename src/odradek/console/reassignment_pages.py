"""The console's partition reassignment pages: the reassignments in progress and how far each has
got, a proposed new assignment of a topic's partitions over chosen brokers, its execution with an
inter-broker throttle, cancelling, and removing the throttles once nothing moves.

Routes:
- `GET /reassignments`: the reassignments in progress (ListPartitionReassignments, asked of the
  controller): per partition its replicas, those being added and removed, its leader and ISR, and
  for each replica being added its log's size on its broker against the leader's (DescribeLogDirs)
  and whether it joined the ISR; a cancel button per topic and one for all; the throttles in place
  (DescribeConfigs of every broker and topic) with a "Remove throttles" button once no reassignment
  is in progress (as `reassign-partitions --verify` clears them: they are not removed by
  themselves); the form choosing a topic, target brokers and replication factor for a plan.
- `GET /reassignments/progress?seen=KEY`: the progress table alone, which the page asks for every
  2 s (htmx); when the set of partitions in progress is no longer the one the page was drawn with
  (`KEY`), the answer asks htmx to reload the whole page (`HX-Refresh`), so cancel buttons and the
  throttles section follow.
- `GET /reassignments/plan?topic=T&broker-N=on...&replication_factor=R`: the proposed assignment
  (Kafka's replica assignment over the chosen brokers, rack-aware when every chosen broker has a
  rack, with a start and shift drawn from a generator seeded by the topic's name: the same choice
  gives the same plan), current -> proposed per partition, and the form executing it.
- `POST /reassignments/execute` (topic, `partition` = "P:B,B,..." per partition, throttle in
  bytes/s, optional): as `kafka-reassign-partitions --execute [--throttle]`: refused while any
  reassignment is in progress; with a throttle, the moving partitions' current replicas become the
  topic's `leader.replication.throttled.replicas`, their new ones its
  `follower.replication.throttled.replicas`, and every broker involved gets the rate as
  `leader/follower.replication.throttled.rate` (IncrementalAlterConfigs); then
  AlterPartitionReassignments.
- `POST /reassignments/cancel` (topic, or none for all): AlterPartitionReassignments with no
  replicas for each of its partitions in progress; then, as `--cancel`, the throttles are removed
  (all of them when nothing else is in progress, else only the cancelled topic's lists).
- `POST /reassignments/throttles/remove`: every broker's throttle rates and every topic's throttled
  replica lists deleted, refused while a reassignment is in progress.
Every form is hidden in read-only mode (and the console refuses the POSTs anyway).

Callers: console/areas.py (AREAS).
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from odradek.client.reassignments import alter_reassignments_request
from odradek.console.reader import ClusterReader
from odradek.console.web import FormError, NotFound, page, required
from odradek.controller.decisions import BrokerPlacement, assign_replicas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError, check
from odradek.protocol.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from odradek.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from odradek.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest

routes = web.RouteTableDef()

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
DYNAMIC_SOURCES = frozenset({1, 2})  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
RATES, REPLICA_LISTS = (LEADER_RATE, FOLLOWER_RATE), (LEADER_REPLICAS, FOLLOWER_REPLICAS)
CONTROLLER_WAIT_S, CONTROLLER_RETRY_S = 10.0, 0.3
POLL = "every 2s"


# ---------------------------------------------------------------------------------------------
# what the pages show


@dataclass(frozen=True)
class Copy:
    """A replica being added: its log's bytes on its broker against the leader's, and whether it
    is in the ISR yet."""

    broker: int
    size: int | None
    leader_size: int | None
    in_isr: bool

    @property
    def percent(self) -> int | None:
        if self.size is None or not self.leader_size:
            return 100 if self.size is not None and self.leader_size == 0 else None
        return min(100, 100 * self.size // self.leader_size)


@dataclass(frozen=True)
class Moving:
    """A partition with a reassignment in progress."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    copies: tuple[Copy, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)


@dataclass(frozen=True)
class Throttles:
    """The throttle configs set: broker id -> {rate config: value}, topic -> {list config: value}."""

    brokers: dict[int, dict[str, str]] = field(default_factory=dict)
    topics: dict[str, dict[str, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.brokers or self.topics)


@dataclass(frozen=True)
class BrokerChoice:
    node_id: int
    rack: str | None


@dataclass(frozen=True)
class PlanRow:
    partition: int
    current: tuple[int, ...]
    proposed: tuple[int, ...]

    @property
    def changed(self) -> bool:
        return self.current != self.proposed


@dataclass(frozen=True)
class Plan:
    topic: str
    brokers: tuple[int, ...]
    replication_factor: int
    rack_aware: bool
    rows: tuple[PlanRow, ...]


def key_of(moving: Iterable[Moving]) -> str:
    """A short key of the set of partitions in progress (the page reloads when it changes)."""
    names = ",".join(sorted(f"{m.topic}/{m.partition}/{'.'.join(map(str, m.target))}" for m in moving))
    return format(zlib.crc32(names.encode()), "08x")


# ---------------------------------------------------------------------------------------------
# blocking calls (the console lane)


def _metadata(reader: ClusterReader, topics: Sequence[str] | None = None) -> Any:
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
    return reader.kafka().any_connection().request(ApiKey.METADATA, request)


def _connection_to(reader: ClusterReader, metadata: Any, broker_id: int) -> Any:
    broker = next((b for b in metadata.brokers if b.node_id == broker_id), None)
    if broker is None:
        raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not alive")
    return reader.kafka().connect_to(broker.host, broker.port)


def _controller_request(reader: ClusterReader, api_key: int, request: Any) -> Any:
    """`request` answered by the controller, asked again while it answers NOT_CONTROLLER."""
    deadline = time.monotonic() + CONTROLLER_WAIT_S
    while True:
        metadata = _metadata(reader, [])
        if any(b.node_id == metadata.controller_id for b in metadata.brokers):
            response = _connection_to(reader, metadata, metadata.controller_id).request(api_key, request)
            if response.error_code != ErrorCode.NOT_CONTROLLER or time.monotonic() > deadline:
                check(response.error_code, response.error_message)
                return response
        elif time.monotonic() > deadline:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller answered")
        time.sleep(CONTROLLER_RETRY_S)


def _listed(reader: ClusterReader) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """The reassignments in progress: (topic, partition) -> replicas, adding, removing."""
    response = _controller_request(
        reader, ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest(topics=None)
    )
    return {
        (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in response.topics
        for p in t.partitions
    }


def _sizes(reader: ClusterReader, metadata: Any, broker_id: int, partitions: set[tuple[str, int]]) -> dict:
    """The bytes of each of `partitions` on a broker (its largest copy); {} when it cannot answer."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    request = DescribeLogDirsRequest(
        topics=[DescribeLogDirsRequest.DescribableLogDirTopic(t, p) for t, p in by_topic.items()]
    )
    try:
        response = _connection_to(reader, metadata, broker_id).request(ApiKey.DESCRIBE_LOG_DIRS, request)
    except (OSError, KafkaError):
        return {}
    sizes: dict[tuple[str, int], int] = {}
    for result in response.results:
        for topic in result.topics if result.error_code == ErrorCode.NONE else ():
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                sizes[key] = max(sizes.get(key, 0), p.partition_size)
    return sizes


def in_progress(reader: ClusterReader) -> list[Moving]:
    """Every reassignment in progress with the progress of its replicas being added."""
    listed = _listed(reader)
    if not listed:
        return []
    metadata = _metadata(reader, sorted({t for t, _ in listed}))
    states = {
        (t.name, p.partition_index): (p.leader_id, tuple(p.isr_nodes))
        for t in metadata.topics
        for p in t.partitions
    }
    asked: dict[int, set[tuple[str, int]]] = {}
    for tp, (_, adding, _) in listed.items():
        for broker in (states.get(tp, (-1, ()))[0], *adding):
            asked.setdefault(broker, set()).add(tp)
    sizes = {broker: _sizes(reader, metadata, broker, tps) for broker, tps in asked.items() if broker >= 0}
    moving = []
    for tp, (replicas, adding, removing) in sorted(listed.items()):
        leader, isr = states.get(tp, (-1, ()))
        leader_size = sizes.get(leader, {}).get(tp)
        copies = tuple(Copy(b, sizes.get(b, {}).get(tp), leader_size, b in isr) for b in adding)
        moving.append(
            Moving(tp[0], tp[1], tuple(replicas), tuple(adding), tuple(removing), leader, isr, copies)
        )
    return moving


def throttles(reader: ClusterReader) -> Throttles:
    """The throttle rates set on each broker and the throttled replica lists set on each topic."""
    metadata = _metadata(reader, None)
    found = Throttles()
    for broker in metadata.brokers:
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    BROKER_RESOURCE, str(broker.node_id), list(RATES)
                )
            ]
        )
        try:
            response = _connection_to(reader, metadata, broker.node_id).request(
                ApiKey.DESCRIBE_CONFIGS, request
            )
        except OSError:
            continue
        for result in response.results:
            if result.error_code == ErrorCode.NONE and (values := _set_values(result.configs)):
                found.brokers[broker.node_id] = values
    topics = sorted(t.name for t in metadata.topics if t.name)
    if topics:
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(TOPIC_RESOURCE, t, list(REPLICA_LISTS))
                for t in topics
            ]
        )
        response = reader.kafka().any_connection().request(ApiKey.DESCRIBE_CONFIGS, request)
        for result in response.results:
            if result.error_code == ErrorCode.NONE and (values := _set_values(result.configs)):
                found.topics[result.resource_name] = values
    return found


def _set_values(configs: Iterable[Any]) -> dict[str, str]:
    return {c.name: c.value for c in configs if c.config_source in DYNAMIC_SOURCES and c.value}


def choices(reader: ClusterReader) -> tuple[list[str], list[BrokerChoice]]:
    """The topics one may move (internal ones left out) and the live brokers."""
    metadata = _metadata(reader, None)
    topics = sorted(t.name for t in metadata.topics if t.name and not t.is_internal)
    brokers = sorted((BrokerChoice(b.node_id, b.rack) for b in metadata.brokers), key=lambda b: b.node_id)
    return topics, brokers


def current_assignment(reader: ClusterReader, topic: str) -> dict[int, tuple[int, ...]]:
    """The topic's replicas per partition; NotFound when there is no such topic."""
    (found,) = _metadata(reader, [topic]).topics
    if found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise NotFound(f"There is no topic named {topic!r}.")
    check(found.error_code)
    return {p.partition_index: tuple(p.replica_nodes) for p in found.partitions}


def propose(
    reader: ClusterReader, topic: str, brokers: Sequence[int], replication_factor: int | None
) -> Plan:
    """Kafka's assignment of the topic's partitions over `brokers` (see the module docstring)."""
    current = current_assignment(reader, topic)
    if not brokers:
        raise FormError("Choose at least one broker.")
    live = {b.node_id: b for b in _metadata(reader, []).brokers}
    unknown = sorted(set(brokers) - set(live))
    if unknown:
        raise FormError(f"Unknown broker id {unknown[0]}.")
    # the replication factor kept: a partition being moved counts its target replicas only
    moving = {p: len(r) - len(removing) for (t, p), (r, _, removing) in _listed(reader).items() if t == topic}
    rf = replication_factor or max((moving.get(p, len(r)) for p, r in current.items()), default=1)
    if not 1 <= rf <= len(brokers):
        raise FormError(f"The replication factor must be between 1 and {len(brokers)} (the chosen brokers).")
    racks = [live[b].rack for b in brokers]
    rack_aware = all(r is not None for r in racks)
    placements = [BrokerPlacement(b, live[b].rack if rack_aware else None) for b in sorted(brokers)]
    assigned = assign_replicas(placements, len(current), rf, rng=random.Random(topic))
    rows = tuple(PlanRow(p, current[p], tuple(assigned[i])) for i, p in enumerate(sorted(current)))
    return Plan(topic, tuple(sorted(brokers)), rf, rack_aware, rows)


def execute(
    reader: ClusterReader, topic: str, targets: Mapping[int, list[int]], throttle: int | None
) -> None:
    """Start moving `topic`'s partitions to `targets`, with the throttle first (see the module
    docstring); a partition the controller refuses raises its error."""
    if _listed(reader):
        raise KafkaError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            "a reassignment is in progress: wait for it to finish, or cancel it, before starting another",
        )
    current = current_assignment(reader, topic)
    missing = sorted(set(targets) - set(current))
    if missing:
        raise FormError(f"Topic {topic} has no partition {missing[0]}.")
    live = {b.node_id for b in _metadata(reader, []).brokers}
    unknown = sorted({b for replicas in targets.values() for b in replicas} - live)
    if unknown:
        raise FormError(f"Unknown broker id {unknown[0]}.")
    moves = {p: (set(current[p]), set(replicas) - set(current[p])) for p, replicas in targets.items()}
    if throttle is not None:
        _set_throttles(reader, topic, moves, throttle)
    _alter(reader, {(topic, p): list(replicas) for p, replicas in targets.items()})


def _set_throttles(
    reader: ClusterReader, topic: str, moves: Mapping[int, tuple[set[int], set[int]]], rate: int
) -> None:
    leaders = sorted(f"{p}:{b}" for p, (sources, _) in moves.items() for b in sources)
    followers = sorted(f"{p}:{b}" for p, (_, destinations) in moves.items() for b in destinations)
    _alter_configs(
        reader.kafka().any_connection(),
        TOPIC_RESOURCE,
        topic,
        {LEADER_REPLICAS: ",".join(leaders), FOLLOWER_REPLICAS: ",".join(followers)},
    )
    metadata = _metadata(reader, [])
    for broker in sorted({b for sources, destinations in moves.values() for b in sources | destinations}):
        _alter_configs(
            _connection_to(reader, metadata, broker),
            BROKER_RESOURCE,
            str(broker),
            {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)},
        )


def _alter(reader: ClusterReader, targets: Mapping[tuple[str, int], list[int] | None]) -> None:
    """AlterPartitionReassignments (None: cancel); raises the first partition's refusal."""
    request = alter_reassignments_request(targets)
    response = _controller_request(reader, ApiKey.ALTER_PARTITION_REASSIGNMENTS, request)
    for t in response.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise KafkaError(
                    ErrorCode(p.error_code), f"{t.name}-{p.partition_index}: {p.error_message or ''}"
                )


def cancel(reader: ClusterReader, topic: str | None) -> tuple[list[str], bool]:
    """Cancel the reassignments in progress of `topic` (None: all), then remove the throttles as
    `--cancel` does: every one when nothing else is in progress (True), else the cancelled topics'
    throttled replica lists (False); and the partitions cancelled, as "topic-partition"."""
    listed = [tp for tp in _listed(reader) if topic is None or tp[0] == topic]
    if listed:
        _alter(reader, dict.fromkeys(listed))
    cancelled = [f"{t}-{p}" for t, p in sorted(listed)]
    if _listed(reader):
        for name in sorted({t for t, _ in listed}):
            _alter_configs(
                reader.kafka().any_connection(), TOPIC_RESOURCE, name, dict.fromkeys(REPLICA_LISTS)
            )
        return cancelled, False
    _clear_throttles(reader)
    return cancelled, True


def remove_throttles(reader: ClusterReader) -> None:
    """Delete every throttle (as `--verify` once done); refused while a reassignment moves."""
    if _listed(reader):
        raise KafkaError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            "a reassignment is in progress: its throttles stay until it ends",
        )
    _clear_throttles(reader)


def _clear_throttles(reader: ClusterReader) -> None:
    found = throttles(reader)
    metadata = _metadata(reader, [])
    live = {b.node_id for b in metadata.brokers}
    for broker in sorted(found.brokers):
        if broker in live:
            _alter_configs(
                _connection_to(reader, metadata, broker), BROKER_RESOURCE, str(broker), dict.fromkeys(RATES)
            )
    for topic in sorted(found.topics):
        _alter_configs(reader.kafka().any_connection(), TOPIC_RESOURCE, topic, dict.fromkeys(REPLICA_LISTS))


def _alter_configs(connection: Any, resource_type: int, name: str, configs: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs: SET each config with a value, DELETE each with None."""
    ops = [
        IncrementalAlterConfigsRequest.AlterableConfig(k, DELETE if v is None else SET, v)
        for k, v in configs.items()
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type, name, ops)]
    )
    for result in connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request).responses:
        check(result.error_code, result.error_message)


# ---------------------------------------------------------------------------------------------
# forms


def _brokers_chosen(form: MultiMapping[Any]) -> list[int]:
    chosen = []
    for name, value in form.items():
        if name.startswith("broker-") and value == "on":
            try:
                chosen.append(int(name.removeprefix("broker-")))
            except ValueError:
                raise FormError(f"Bad broker field {name!r}.") from None
    return sorted(set(chosen))


def _optional_int(value: object, what: str, minimum: int) -> int | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        number = int(text)
    except ValueError:
        raise FormError(f"The {what} must be a whole number, not {text!r}.") from None
    if number < minimum:
        raise FormError(f"The {what} must be at least {minimum}.")
    return number


def _targets(values: Iterable[object]) -> dict[int, list[int]]:
    """The plan's partitions, each "P:B,B,..."."""
    targets: dict[int, list[int]] = {}
    for value in values:
        partition, _, replicas = str(value).partition(":")
        try:
            brokers = [int(b) for b in replicas.split(",")]
            targets[int(partition)] = brokers
        except ValueError:
            raise FormError(f"Bad partition assignment {str(value)!r}.") from None
        if len(set(brokers)) != len(brokers):
            raise FormError(f"Partition {partition} names a broker twice.")
    if not targets:
        raise FormError("The plan has no partition.")
    return targets


# ---------------------------------------------------------------------------------------------
# routes


@routes.get("/reassignments")
async def reassignments(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    moving = await ctx.run(in_progress)
    found = await ctx.run(throttles)
    topics, brokers = await ctx.run(choices)
    return ctx.render(
        "reassignments/list.html",
        title="Partition reassignments",
        moving=moving,
        seen=key_of(moving),
        poll=POLL,
        moving_topics=sorted({m.topic for m in moving}),
        throttles=found,
        topics=topics,
        brokers=brokers,
    )


@routes.get("/reassignments/progress")
async def progress(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    moving = await ctx.run(in_progress)
    if key_of(moving) != request.query.get("seen"):
        return web.Response(text="", headers={"HX-Refresh": "true"})
    return ctx.fragment("reassignments/progress.html", moving=moving)


@routes.get("/reassignments/plan")
async def plan(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    topic = required(request.query, "topic", "Choose a topic.")
    rf = _optional_int(request.query.get("replication_factor"), "replication factor", 1)
    proposed = await ctx.run(propose, topic, _brokers_chosen(request.query), rf)
    return ctx.render("reassignments/plan.html", title=f"Reassignment plan for {topic}", plan=proposed)


@routes.post("/reassignments/execute")
async def execute_plan(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    topic = required(form, "topic", "Choose a topic.")
    targets = _targets(form.getall("partition", []))
    throttle = _optional_int(form.get("throttle"), "throttle", 1)
    limit = f", throttled to {throttle} B/s" if throttle is not None else ""
    await ctx.attempt(
        f"Started reassigning {len(targets)} partition(s) of {topic}{limit}.",
        execute,
        topic,
        targets,
        throttle,
    )
    raise ctx.redirect("/reassignments")


@routes.post("/reassignments/cancel")
async def cancel_reassignments(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    form = await request.post()
    topic = str(form.get("topic", "")) or None
    try:
        cancelled, cleared = await ctx.run(cancel, topic)
    except KafkaError as exc:
        ctx.flash("warn", f"Refused: {exc}")
    else:
        removed = "every throttle removed" if cleared else "the topic's throttled replicas removed"
        if cancelled:
            ctx.flash("ok", f"Cancelled the reassignment of {', '.join(cancelled)}; {removed}.")
        else:
            ctx.flash("warn", f"No reassignment to cancel: it had already finished; {removed}.")
    raise ctx.redirect("/reassignments")


@routes.post("/reassignments/throttles/remove")
async def remove(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    await ctx.attempt("Removed the replication throttles.", remove_throttles)
    raise ctx.redirect("/reassignments")
