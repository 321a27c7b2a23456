"""Client quotas: Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

Owns the quota limits of this broker (read from the metadata store's client entity configs and kept
current by its watcher, so an AlterClientQuotas on any broker reaches every broker at once), the
per-group rate sensors, and the throttle times the request path answers with.

Quota types (the entity config keys): `producer_byte_rate` (bytes of Produce requests per second),
`consumer_byte_rate` (bytes of records answered to consumer Fetches per second),
`request_percentage` (the share of the broker's request-handling time, see below) and
`controller_mutation_rate` (partitions created or deleted per second by CreateTopics,
CreatePartitions and DeleteTopics).

Entities and precedence, as Kafka's DefaultQuotaCallback: a request's user (its principal's name:
ANONYMOUS without authentication) and client id pick the first configured of (user, client-id),
(user, default client-id), (user), (default user, client-id), (default user, default client-id),
(default user), (client-id), (default client-id). The quota group is named by the metric tags of the
level that matched: (user, client-id) for the levels naming both, (user, "") for the user levels,
("", client-id) for the client-id levels, so a default quota applies to each user / client id on its
own, and all connections of a group share one sensor. No level configured: no sensor, no throttle.

Enforcement (KIP-219): a group's rate is its recorded total over `quota.window.num` samples of
`quota.window.size.seconds` each (Kafka's SampledStat Rate: num + 1 samples kept, a sample counted
until its last record is num windows old, the window never counted shorter than num - 1 samples).
A record that takes the rate over the limit answers the throttle time that brings it back:
(rate - limit) / limit x window. The dispatcher puts it in the response's throttle_time_ms
and mutes the connection for that long (`ClientInfo.throttle`). The request quota's throttle time is
bounded by one window, as Kafka's. Controller mutations use Kafka's token bucket instead (a burst of
limit x num x window partitions, refilled at the limit): a strict request (CreateTopics v6+,
CreatePartitions v3+, DeleteTopics v5+) is refused with THROTTLING_QUOTA_EXCEEDED while the bucket is
empty, older ones are let through and throttled.

What 100% request_percentage means here: one second per second of the event loop's time spent
running the group's requests (their decode and each step of their handler) - the event
loop is odradek's one request handler thread, so 100% is the whole broker's request handling.
Work the broker hands to its worker lanes (disk writes, fsync, decompression of large batches) is not
counted. Kafka's 100% is one of its num.io.threads + num.network.threads threads.

Idle groups are forgotten once their whole window has passed without a record (Kafka keeps them an
hour), so 10,000 short-lived client ids cost no memory after a window; the sweep runs at most once
per window, from the record path.

Callers: the dispatcher (the quota stage: Produce bytes, request time, the mute), the Fetch handler
(consumer bytes, its fetch cap), the controller mutation handlers, the metrics and the console.
"""

from __future__ import annotations

import math
import time
from collections.abc import Coroutine, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.controller.store import CLIENT_ID, USER, ClientEntity, client_entity_of
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.controller.store import MetadataStore
    from odradek.security.authorizer import AuthorizableRequestContext

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)

NANOS_TO_PERCENTAGE = 100.0 / 1e9  # a nanosecond of handling as a percentage of one second

# The cluster's own APIs, exempt from the request quota as Kafka exempts ApiKeys.clusterActions.
REQUEST_QUOTA_EXEMPT_APIS = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
    }
)


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """`quota.window.num` samples of `quota.window.size.seconds`."""

    samples: int = 11
    size_ms: int = 1000

    @property
    def total_ms(self) -> int:
        return self.samples * self.size_ms


class Rate:
    """Kafka's SampledStat Rate over `window`: a ring of num + 1 samples (Kafka keeps one more than
    quota.window.num), each a window long from its first record. A sample counts until its last
    record is a whole window (num x size) old, so a sample that began before the window but was
    recorded into within it still counts (Kafka's purgeObsoleteSamples); the rate divides by the
    time since the oldest sample began. The total and the oldest start are kept as samples change,
    so a record and a measure cost O(1) but once per window (a sample starting) or when a sample
    may have expired. The window's numbers are copied in: the record path reads only slots."""

    __slots__ = (
        "_starts", "_lasts", "_values", "_current", "total", "_oldest", "_size_ms", "_ring", "_samples",
        "_span_ms",
    )  # fmt: skip

    def __init__(self, now_ms: float, window: QuotaWindow) -> None:
        self._starts = [now_ms]
        self._lasts = [now_ms]
        self._values = [0.0]
        self._current = 0
        self.total = 0.0
        self._oldest = now_ms
        self._size_ms, self._samples, self._span_ms = window.size_ms, window.samples, window.total_ms
        self._ring = window.samples + 1

    def record(self, value: float, now_ms: float) -> None:
        current = self._current
        if now_ms >= self._starts[current] + self._size_ms:
            current = self._next_sample(now_ms)
        self._values[current] += value
        self._lasts[current] = now_ms
        self.total += value

    def _next_sample(self, now_ms: float) -> int:
        current = self._current = (self._current + 1) % self._ring
        if current >= len(self._starts):
            self._starts.append(now_ms)
            self._lasts.append(now_ms)
            self._values.append(0.0)
        else:
            self._reset(current, now_ms)
            self._oldest = min(self._starts)
        return current

    def _reset(self, index: int, now_ms: float) -> None:
        self.total -= self._values[index]
        self._starts[index], self._lasts[index], self._values[index] = now_ms, now_ms, 0.0

    def measure(self, now_ms: float) -> tuple[float, float]:
        """(the rate per second, the window in ms it is measured over)."""
        if now_ms - self._oldest >= self._span_ms:  # a sample may have expired: none began earlier
            self._purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest
        short = self._samples - 1 - int(elapsed // self._size_ms)
        if short > 0:  # never shorter than samples - 1 whole samples
            elapsed += short * self._size_ms
        return self.total * 1000.0 / elapsed, elapsed

    def _purge_obsolete(self, now_ms: float) -> None:
        for i, last in enumerate(self._lasts):
            if now_ms - last >= self._span_ms:
                self._reset(i, now_ms)
        self._oldest = min(self._starts)


class QuotaGroup:
    """One quota group's sensor: its tags, limit, rate, and the throttle times it was answered (their
    two rates made at its first throttle: most groups are never throttled)."""

    __slots__ = ("user", "client_id", "limit", "window_max", "rate", "throttle", "throttled", "last_ms")

    def __init__(self, user: str, client_id: str, limit: float, now_ms: float, window: QuotaWindow) -> None:
        self.user, self.client_id = user, client_id
        self.set_limit(limit, window)
        self.rate = Rate(now_ms, window)
        # the throttle times answered and how many (Kafka's throttle-time: their average)
        self.throttle: Rate | None = None
        self.throttled: Rate | None = None
        self.last_ms = now_ms

    def set_limit(self, limit: float, window: QuotaWindow) -> None:
        """The limit, and Kafka's getMaxValueInQuotaWindow: limit x (num - 1) x window size. A rate
        is never measured over less than num - 1 samples, so a total up to `window_max` is within
        the quota whatever the samples' times: the record path needs no measure then."""
        self.limit = limit
        self.window_max = limit * (window.samples - 1) * window.size_ms / 1000

    def record_throttle(self, throttle_ms: int, now_ms: float, window: QuotaWindow) -> None:
        if self.throttle is None or self.throttled is None:
            self.throttle, self.throttled = Rate(now_ms, window), Rate(now_ms, window)
        self.throttle.record(throttle_ms, now_ms)
        self.throttled.record(1, now_ms)

    def throttle_time_avg(self, now_ms: float) -> float:
        """The average throttle time of the requests throttled in the window (0: none)."""
        if self.throttle is None or self.throttled is None:
            return 0.0
        throttled = self.throttled.measure(now_ms)[0]
        return self.throttle.measure(now_ms)[0] / throttled if throttled else 0.0


# The eight levels: (user component, client-id component) of the entity looked up, and whether the
# group's tags keep the user and the client id. None is a default component, USER/CLIENT_ID the name.
_LEVELS: tuple[tuple[tuple[tuple[str, bool], ...], bool, bool], ...] = (
    (((USER, True), (CLIENT_ID, True)), True, True),
    (((USER, True), (CLIENT_ID, False)), True, True),
    (((USER, True),), True, False),
    (((USER, False), (CLIENT_ID, True)), True, True),
    (((USER, False), (CLIENT_ID, False)), True, True),
    (((USER, False),), True, False),
    (((CLIENT_ID, True),), False, True),
    (((CLIENT_ID, False),), False, True),
)


def quota_entity_for(
    limits: Mapping[ClientEntity, float], user: str, client_id: str
) -> tuple[str, str, float] | None:
    """The (user tag, client-id tag, limit) of the first configured level for `user` and `client_id`
    in the seeds' eight-level order, or None when no level has a limit."""
    names = {USER: user, CLIENT_ID: client_id}
    for components, keep_user, keep_client in _LEVELS:
        entity = tuple((kind, names[kind] if named else None) for kind, named in components)
        limit = limits.get(entity)
        if limit is not None:
            return (user if keep_user else "", client_id if keep_client else "", limit)
    return None


class ClientQuotaManager:
    """The sensors of one quota type (Kafka's ClientQuotaManager for Produce / Fetch, and with
    `max_throttle_ms` its ClientRequestQuotaManager)."""

    def __init__(self, key: str, window: QuotaWindow, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.window = window
        self._max_throttle_ms = max_throttle_ms
        self._limits: dict[ClientEntity, float] = {}
        self._resolved: dict[tuple[str, str], QuotaGroup | None] = {}
        self._groups: dict[tuple[str, str], QuotaGroup] = {}
        self._next_sweep_ms = 0.0
        self.enabled = False  # a limit of this type is set

    def set_limits(self, limits: Mapping[ClientEntity, float]) -> None:
        """New limits: every client is resolved again at its next request (a group that stays keeps
        its rate and takes its new limit)."""
        self._limits = dict(limits)
        self.enabled = bool(self._limits)
        self._resolved.clear()

    def group(self, user: str, client_id: str, now_ms: float) -> QuotaGroup | None:
        """The group of `user` / `client_id` (None: no quota applies); resolved once, until the
        limits change or the group is swept."""
        known = self._resolved.get((user, client_id), False)
        if known is not False:
            return known
        found = quota_entity_for(self._limits, user, client_id)
        group = None
        if found is not None:
            tags = found[:2]
            group = self._groups.get(tags)
            if group is None:
                group = self._groups[tags] = QuotaGroup(*tags, found[2], now_ms, self.window)
            group.set_limit(found[2], self.window)
        self._resolved[(user, client_id)] = group
        return group

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record `value` for the group; the throttle time in ms (0: within its quota). The request
        path's one call per quota type: the lookup, the record and the measure inline."""
        if not self._limits:
            return 0
        group = self._resolved.get((user, client_id), False)
        if group is False:
            group = self.group(user, client_id, now_ms)
        if group is None:
            return 0
        rate = group.rate
        rate.record(value, now_ms)
        group.last_ms = now_ms
        throttle_ms = 0 if rate.total <= group.window_max else self._throttle_ms(group, now_ms)
        if throttle_ms:
            group.record_throttle(throttle_ms, now_ms, self.window)
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        group = self.group(user, client_id, now_ms) if self._limits else None
        if group is not None:
            group.rate.record(-value, now_ms)

    def throttle_ms(self, user: str, client_id: str, now_ms: float) -> int:
        """The throttle time the group is over its quota by now, recording nothing."""
        group = self.group(user, client_id, now_ms) if self._limits else None
        return 0 if group is None else self._throttle_ms(group, now_ms)

    def max_value_in_window(self, user: str, client_id: str, now_ms: float) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: limit x (num - 1) x window size; None without a quota."""
        group = self.group(user, client_id, now_ms) if self._limits else None
        return None if group is None else group.window_max

    def _throttle_ms(self, group: QuotaGroup, now_ms: float) -> int:
        rate, window_ms = group.rate.measure(now_ms)
        if rate <= group.limit:
            return 0
        throttle = round((rate - group.limit) / group.limit * window_ms) if group.limit > 0 else window_ms
        if self._max_throttle_ms is not None:
            throttle = min(throttle, self._max_throttle_ms)
        return int(throttle)

    def maybe_sweep(self, now_ms: float) -> None:
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)

    def _sweep(self, now_ms: float) -> None:
        """Forget the groups with no record for a whole window (and the client ids they resolved)."""
        self._next_sweep_ms = now_ms + self.window.size_ms
        expired = now_ms - self.window.total_ms
        # a new dict, not deletions: a dict keeps its table at its largest size
        self._groups = {tags: group for tags, group in self._groups.items() if group.last_ms >= expired}
        # the clients resolved to no quota are looked up again when they come back
        self._resolved = {
            k: g for k, g in self._resolved.items() if g is not None and (g.user, g.client_id) in self._groups
        }

    def groups(self) -> Iterator[QuotaGroup]:
        return iter(list(self._groups.values()))

    def measure(self, group: QuotaGroup, now_ms: float) -> tuple[float, float]:
        """(the group's rate per second, the average throttle time of its throttled requests)."""
        return group.rate.measure(now_ms)[0], group.throttle_time_avg(now_ms)


class ControllerMutationQuota:
    """One request's controller mutation quota (Kafka's Strict/PermissiveControllerMutationQuota):
    `record(partitions)` before each topic's mutation; `throttle_time_ms` for the response."""

    def __init__(self, bucket: TokenBucket | None, strict: bool, now_ms: float) -> None:
        self._bucket, self._strict, self._now_ms = bucket, strict, now_ms
        self.throttle_time_ms = 0

    @property
    def limited(self) -> bool:
        return self._bucket is not None

    def record(self, partitions: int) -> None:
        """Count a mutation of `partitions`; THROTTLING_QUOTA_EXCEEDED (strict) when the bucket is empty."""
        bucket = self._bucket
        if bucket is None or partitions <= 0:
            return
        tokens = bucket.refill(self._now_ms)
        if self._strict and tokens < 0:
            self.throttle_time_ms = max(self.throttle_time_ms, bucket.throttle_ms())
            raise KafkaError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"The throttling quota has been exceeded: wait {self.throttle_time_ms} ms",
            )
        bucket.tokens -= partitions
        bucket.group.rate.record(partitions, self._now_ms)
        self.throttle_time_ms = max(self.throttle_time_ms, bucket.throttle_ms())
        if self.throttle_time_ms:
            bucket.group.record_throttle(self.throttle_time_ms, self._now_ms, bucket.window)


class TokenBucket:
    """Kafka's TokenBucket stat of a controller mutation quota group."""

    __slots__ = ("group", "tokens", "refilled_ms", "window")

    def __init__(self, group: QuotaGroup, window: QuotaWindow, now_ms: float) -> None:
        self.group, self.window = group, window
        self.tokens = self.burst
        self.refilled_ms = now_ms

    @property
    def burst(self) -> float:
        return self.group.limit * self.window.total_ms / 1000

    def refill(self, now_ms: float) -> float:
        elapsed = max(0.0, now_ms - self.refilled_ms)
        self.tokens = min(self.burst, self.tokens + self.group.limit * elapsed / 1000)
        self.refilled_ms = now_ms
        return self.tokens

    def throttle_ms(self) -> int:
        if self.tokens >= 0 or self.group.limit <= 0:
            return 0
        return math.ceil(-self.tokens / self.group.limit * 1000)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """The controller mutation quota groups, each with its token bucket."""

    def __init__(self, window: QuotaWindow) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, window)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def quota_for(self, user: str, client_id: str, strict: bool, now_ms: float) -> ControllerMutationQuota:
        group = self.group(user, client_id, now_ms) if self.enabled else None
        if group is None:
            return ControllerMutationQuota(None, strict, now_ms)
        group.last_ms = now_ms
        self.maybe_sweep(now_ms)
        bucket = self._buckets.get((group.user, group.client_id))
        if bucket is None or bucket.group is not group:
            bucket = self._buckets[(group.user, group.client_id)] = TokenBucket(group, self.window, now_ms)
        return ControllerMutationQuota(bucket, strict, now_ms)

    def _sweep(self, now_ms: float) -> None:
        super()._sweep(now_ms)
        self._buckets = {tags: b for tags, b in self._buckets.items() if self._groups.get(tags) is b.group}


class QuotaManager(Protocol):
    """What the request path asks of the quotas (server/dispatcher.py)."""

    @property
    def request_quota_enabled(self) -> bool: ...

    def record_request(self, ctx: AuthorizableRequestContext, request_bytes: int, handling_ns: int) -> int:
        """Record a request's Produce bytes (for Produce) and handling time (when request quotas are
        on); the milliseconds its connection must wait (0: none)."""
        ...


class NoQuotas:
    """No quota, no throttling: the request path of a broker built without a store (tests)."""

    request_quota_enabled = False

    def record_request(self, ctx: AuthorizableRequestContext, request_bytes: int, handling_ns: int) -> int:
        return 0


def limits_of(entities: Mapping[tuple[str, str], Mapping[str, str]], key: str) -> dict[ClientEntity, float]:
    """The limits of quota `key` the client entity configs set: entity -> limit."""
    limits: dict[ClientEntity, float] = {}
    for (entity_type, name), configs in entities.items():
        value = configs.get(key)
        if value is not None:
            limits[client_entity_of(entity_type, name)] = float(value)
    return limits


class ClientQuotas:
    """The broker's four quota managers, fed by the store's client entity configs."""

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window, max_throttle_ms=window.size_ms)
        self.controller_mutation = ControllerMutationQuotaManager(window)
        self._store: MetadataStore | None = None

    def watch(self, store: MetadataStore) -> None:
        """Take the quotas of `store` now and after each of its client entity changes."""
        self._store = store
        store.watch_client_entity_configs(lambda _type, _name: self.reload())
        self.reload()

    def managers(self) -> Iterable[ClientQuotaManager]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def reload(self) -> None:
        """Read every quota from the store (at start and after each client entity change)."""
        entities = self._store.client_entities() if self._store is not None else {}
        for manager in self.managers():
            manager.set_limits(limits_of(entities, manager.key))

    @property
    def request_quota_enabled(self) -> bool:
        return self.request.enabled

    def controller_mutation_quota(
        self, ctx: AuthorizableRequestContext, strict: bool, validate_only: bool = False
    ) -> ControllerMutationQuota:
        """One CreateTopics / CreatePartitions / DeleteTopics request's quota (unbounded when it
        only validates, as Kafka's)."""
        manager, now_ms = self.controller_mutation, now_monotonic_ms()
        if validate_only or not manager.enabled:
            return ControllerMutationQuota(None, strict, now_ms)
        return manager.quota_for(*quota_names(ctx), strict, now_ms)

    def record_request(self, ctx: AuthorizableRequestContext, request_bytes: int, handling_ns: int) -> int:
        throttle_ms = 0
        if request_bytes and self.produce.enabled:
            throttle_ms = self.produce.record(ctx.principal.name, ctx.header.client_id or "", request_bytes,
                                              time.monotonic_ns() / 1e6)  # fmt: skip
        if handling_ns and self.request.enabled:
            percent = handling_ns * NANOS_TO_PERCENTAGE
            throttle_ms = max(
                throttle_ms, self.request.record(*quota_names(ctx), percent, now_monotonic_ms())
            )
        return throttle_ms


def quota_names(ctx: AuthorizableRequestContext) -> tuple[str, str]:
    """The user (the principal's name: ANONYMOUS without authentication) and client id of a request."""
    return ctx.principal.name, ctx.header.client_id or ""


def now_monotonic_ms() -> float:
    return time.monotonic_ns() / 1e6


class HandlingTimer:
    """Awaits a handler coroutine, summing the time its steps run on the event loop (`elapsed_ns`):
    the request's own handling time, without the time it waits (purgatory, replication, lanes)."""

    __slots__ = ("_coro", "elapsed_ns")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.elapsed_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, send, error = self._coro, None, None
        while True:
            started = time.perf_counter_ns()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as done:
                return done.value
            finally:
                self.elapsed_ns += time.perf_counter_ns() - started
            try:
                send, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go into the handler
                send, error = None, exc


# Kafka's types of the quota keys: the byte rates are longs, the others doubles.
LONG_QUOTA_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})
IP = "ip"


def quota_entity(components: Iterable[tuple[str, str | None]]) -> ClientEntity:
    """A request's entity (user and/or client-id, a None name for the default) as the store's
    ClientEntity; INVALID_REQUEST for a repeated, unknown, empty or ip entity (odradek has no ip
    quotas: connection_creation_rate is the broker-wide max.connection.creation.rate only)."""
    names: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type in names:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate entity type {entity_type}")
        if entity_type == IP:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "ip quotas are not supported")
        if entity_type not in (USER, CLIENT_ID):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown entity type {entity_type}")
        if name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} name")
        names[entity_type] = name
    if not names:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Empty entity")
    return tuple((kind, names[kind]) for kind in (USER, CLIENT_ID) if kind in names)


def quota_value(key: str, value: float) -> str:
    """A quota's value as stored (Kafka's string of a long or a double); INVALID_REQUEST for an
    unknown key, a fractional byte rate or a value not above 0."""
    if key not in QUOTA_KEYS:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be greater than 0")
    if key in LONG_QUOTA_KEYS:
        if not value.is_integer():
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a Long value")
        return str(int(value))
    return repr(float(value))


def quota_values(configs: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a client entity's configs (others, such as SCRAM credentials, left out)."""
    return {key: float(configs[key]) for key in QUOTA_KEYS if key in configs}
