"""Driver-side planning of reads: which partitions a subscription covers and where ranges start/end.

Owns the translation of parsed options (odradek.spark.options) into concrete per-partition offsets
by asking the broker (Metadata, ListOffsets through odradek.client), with Spark's Kafka source rules:
- `subscribe` covers every partition of the named topics, and a named topic that does not exist
  fails the read (`UnknownTopicError`), as Spark's source does; `subscribePattern` covers every
  partition of every non-internal topic whose name the pattern finds a match in; `assign` the given
  partitions that exist, and fails when an assigned topic does not exist;
- the broker calls that resolve offsets are attempted `fetchOffset.numRetries` times,
  `fetchOffset.retryIntervalMs` apart, before the last error fails the query (`with_retries`);
- in a batch read a starting offset after its ending offset fails the read whatever
  `failOnDataLoss` says (`check_batch_ranges`), as Spark's batch source does;
- per-partition JSON offsets and timestamps must name exactly the partitions the subscription
  covers; -2 resolves to the log start offset, -1 to the high watermark;
- a timestamp with no offset at or after it fails the query when starting (unless
  `startingOffsetsByTimestampStrategy` is "latest") and binds to the high watermark when ending;
- data loss (see offsets.plan_ranges) raises `DataLossError` when `failOnDataLoss` is true and is
  logged as a warning otherwise.

Callers: odradek.spark.source (driver side only; never in executors).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeVar

from odradek.client import KafkaClient
from odradek.client.types import TopicPartition
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.spark.offsets import PartitionOffsets
from odradek.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    OptionError,
    SourceOptions,
    SpecificOffsets,
    Subscribe,
    Subscription,
    TimestampOffsets,
)

T = TypeVar("T")

log = logging.getLogger(__name__)

_DATA_LOSS_HINT = (
    " Some data may have been lost because it is not available on the broker any more: either it was"
    " removed by retention or the topic was deleted before all its data was processed. If you want"
    " the query to go on in such cases, set the source option 'failOnDataLoss' to 'false'."
)
_NO_OFFSET_FOR_TIMESTAMP = -1


class DataLossError(RuntimeError):
    """Records the query should have read are gone (and `failOnDataLoss` is true)."""


class UnknownTopicError(KafkaError):
    """A topic named by `subscribe` or `assign` does not exist."""

    def __init__(self, topics: Iterable[str], option: str) -> None:
        names = ", ".join(repr(t) for t in sorted(topics))
        super().__init__(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {names} of option '{option}' does not exist"
        )


class OffsetRangeError(RuntimeError):
    """A batch read's starting offset is after its ending offset."""


def with_retries(options: SourceOptions, body: Callable[[KafkaClient], T]) -> T:
    """Run `body` with a fresh client, up to `fetchOffset.numRetries` times on broker errors."""
    for attempt in range(1, options.offset_fetch_attempts + 1):
        try:
            with options.client.connect() as client:
                return body(client)
        except (KafkaError, OSError) as exc:
            if attempt == options.offset_fetch_attempts:
                raise
            log.warning(
                "attempt %d of %d to get offsets failed: %s", attempt, options.offset_fetch_attempts, exc
            )
            time.sleep(options.offset_retry_interval_ms / 1000)
    raise AssertionError("unreachable: offset_fetch_attempts is positive")


def check_batch_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> None:
    """Fail a batch read whose start is past its end on some partition (Spark's wording)."""
    for tp in sorted(start):
        if tp in end and start[tp] > end[tp]:
            raise OffsetRangeError(
                f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for topic {tp.topic}"
                f" partition {tp.partition}. You either provided an invalid fromOffset, or the Kafka topic"
                " has been damaged"
            )


def report_data_loss(messages: Iterable[str], fail_on_data_loss: bool) -> None:
    """Raise for the first loss when failing on data loss, else log each one."""
    for message in messages:
        if fail_on_data_loss:
            raise DataLossError(message + "." + _DATA_LOSS_HINT)
        log.warning("%s; going on because failOnDataLoss is false", message)


def subscribed_partitions(
    client: KafkaClient, subscription: Subscription, *, known: Collection[str] = ()
) -> list[TopicPartition]:
    """The partitions the subscription covers right now, sorted.

    A named topic that does not exist fails, unless it is in `known` (topics a stream already read:
    one deleted since is data loss, which the caller reports, not a wrong option).
    """
    if isinstance(subscription, Assign):
        topics = sorted({tp.topic for tp in subscription.partitions})
        cluster = client.metadata(topics)
        _check_exist(cluster.topics, topics, "assign", known)
        existing = {meta.topic_partition for topic in topics for meta in cluster.partitions_of(topic)}
        return sorted(tp for tp in subscription.partitions if tp in existing)
    if isinstance(subscription, Subscribe):
        cluster = client.metadata(list(subscription.topics))
        _check_exist(cluster.topics, subscription.topics, "subscribe", known)
        topics = list(subscription.topics)
    else:
        cluster = client.metadata(None)
        topics = [t for t in cluster.topics if t not in cluster.internal_topics and subscription.matches(t)]
    return sorted(meta.topic_partition for topic in topics for meta in cluster.partitions_of(topic))


def _check_exist(
    existing: Mapping[str, object], topics: Iterable[str], option: str, known: Collection[str]
) -> None:
    missing = [t for t in topics if t not in existing and t not in known]
    if missing:
        raise UnknownTopicError(missing, option)


def resolve_offsets(
    client: KafkaClient,
    partitions: list[TopicPartition],
    spec: OffsetSpec,
    *,
    starting: bool,
    timestamp_not_found_latest: bool = False,
) -> PartitionOffsets:
    """Concrete offsets of `partitions` for a starting or ending spec."""
    if not partitions:
        return {}
    if isinstance(spec, EarliestOffsets):
        return client.list_offsets(dict.fromkeys(partitions, EARLIEST))
    if isinstance(spec, LatestOffsets):
        return client.list_offsets(dict.fromkeys(partitions, LATEST))
    if isinstance(spec, GlobalTimestamp):
        return _by_timestamp(
            client, dict.fromkeys(partitions, spec.timestamp_ms), starting, timestamp_not_found_latest
        )
    wanted = spec.as_dict()
    _check_covers(wanted, partitions, spec, starting)
    if isinstance(spec, SpecificOffsets):
        symbolic = {tp: offset for tp, offset in wanted.items() if offset in (EARLIEST, LATEST)}
        resolved = client.list_offsets(symbolic) if symbolic else {}
        return {tp: resolved.get(tp, offset) for tp, offset in wanted.items()}
    assert isinstance(spec, TimestampOffsets)
    return _by_timestamp(client, wanted, starting, timestamp_not_found_latest)


def _check_covers(
    wanted: Mapping[TopicPartition, int], partitions: list[TopicPartition], spec: OffsetSpec, starting: bool
) -> None:
    if set(wanted) == set(partitions):
        return
    side = "starting" if starting else "ending"
    what = "timestamps" if isinstance(spec, TimestampOffsets) else "offsets"
    raise OptionError(
        f"if {side} {what} are given per partition, they must name every partition of the subscription"
        f" (use -1 for latest, -2 for earliest); given: {_names(wanted)}, subscribed: {_names(partitions)}"
    )


def _names(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"


def _by_timestamp(
    client: KafkaClient, timestamps: dict[TopicPartition, int], starting: bool, not_found_latest: bool
) -> PartitionOffsets:
    found = client.list_offsets(timestamps)
    missing = [tp for tp, offset in found.items() if offset == _NO_OFFSET_FOR_TIMESTAMP]
    if not missing:
        return found
    if starting and not not_found_latest:
        raise OptionError(
            f"no offset has a timestamp at or after the one asked for in {_names(missing)}; set"
            " 'startingOffsetsByTimestampStrategy' to 'latest' to start those partitions at the latest offset"
        )
    latest = client.list_offsets(dict.fromkeys(missing, LATEST))
    return {**found, **latest}
