"""Driver-side planning of reads: which partitions a subscription covers and where ranges start/end.

Owns the translation of parsed options (odradek.spark.options) into concrete per-partition offsets
by asking the broker (Metadata, ListOffsets through odradek.client), with Spark's Kafka source rules:
- `subscribe` covers every partition of the named topics that exist; `subscribePattern` every
  partition of every non-internal topic whose name matches; `assign` exactly the given partitions;
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
from collections.abc import Iterable, Mapping

from odradek.client import KafkaClient
from odradek.client.types import TopicPartition
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
    SpecificOffsets,
    Subscribe,
    Subscription,
    TimestampOffsets,
)

log = logging.getLogger(__name__)

_DATA_LOSS_HINT = (
    " Some data may have been lost because it is not available on the broker any more: either it was"
    " removed by retention or the topic was deleted before all its data was processed. If you want"
    " the query to go on in such cases, set the source option 'failOnDataLoss' to 'false'."
)
_NO_OFFSET_FOR_TIMESTAMP = -1


class DataLossError(RuntimeError):
    """Records the query should have read are gone (and `failOnDataLoss` is true)."""


def report_data_loss(messages: Iterable[str], fail_on_data_loss: bool) -> None:
    """Raise for the first loss when failing on data loss, else log each one."""
    for message in messages:
        if fail_on_data_loss:
            raise DataLossError(message + "." + _DATA_LOSS_HINT)
        log.warning("%s; going on because failOnDataLoss is false", message)


def subscribed_partitions(client: KafkaClient, subscription: Subscription) -> list[TopicPartition]:
    """The partitions the subscription covers right now, sorted."""
    if isinstance(subscription, Assign):
        return sorted(subscription.partitions)
    if isinstance(subscription, Subscribe):
        cluster = client.metadata(list(subscription.topics))
        topics: Iterable[str] = subscription.topics
    else:
        cluster = client.metadata(None)
        topics = [t for t in cluster.topics if t not in cluster.internal_topics and subscription.matches(t)]
    return sorted(meta.topic_partition for topic in topics for meta in cluster.partitions_of(topic))


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
