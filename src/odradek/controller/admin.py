"""The admin manager: topic creation, growth, deletion and config changes, written to the store.

Owns the checks Kafka's ZkAdminManager / AdminZkClient make before writing: topic name rules and
collisions, TOPIC_ALREADY_EXISTS, partition counts and replication factors, explicit assignments
(`decisions.check_assignments`), Kafka's replica assignment over the live brokers otherwise, and the
per-broker partition cap (`max.broker.partitions`, POLICY_VIOLATION). A request that fails any check
changes nothing; `validate_only` runs every check and writes nothing.

Behaviour: it writes only the admin part of the store (assignment, configs, deletion marks); the
controller reacts to the store's events and brings partitions online or deletes them, so the answer
of a write means "durably requested", not "done" — callers that must wait for leaders wait on the
broker's metadata cache (Kafka's DelayedCreatePartitions). In ZooKeeper mode any broker runs one over
the ZooKeeper store; in local mode it runs over the local file, beside the controller.

Invariants: admin operations are serialised (one check-then-write at a time), so two concurrent
requests cannot both pass the cap or both create one name.

Callers: the CreateTopics / CreatePartitions / DeleteTopics / AlterConfigs handlers, auto topic
creation (Metadata, FindCoordinator) through the broker.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence

from odradek.controller import decisions
from odradek.controller.metadata import Assignments, BrokerInfo, collision_key, validate_topic_name
from odradek.controller.store import MetadataStore, StoredTopic
from odradek.protocol.errors import ErrorCode, KafkaError

# max.broker.partitions' default (server/config.py): an idle partition measured ~5 KiB of broker RSS
# (segment files are opened on demand through the LogManager's bounded file cache), so 10,000
# replicas per broker is ~50 MiB and seconds of background creation.
DEFAULT_MAX_BROKER_PARTITIONS = 10_000

log = logging.getLogger(__name__)


class AdminManager:
    """See the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        live_brokers: Callable[[], Sequence[BrokerInfo]],
        max_broker_partitions: int = DEFAULT_MAX_BROKER_PARTITIONS,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self._live_brokers = live_brokers
        self.max_broker_partitions = max_broker_partitions
        self._rng = rng or random.Random()
        self._lock = asyncio.Lock()

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        assignments: Assignments | None = None,
        validate_only: bool = False,
    ) -> StoredTopic:
        """Check and store a new topic (assignment and configs); returns it."""
        async with self._lock:
            self._check_new_name(name)
            count = len(assignments) if assignments else num_partitions
            decisions.check_partition_count_fits(count, len(self._live_ids()), self.max_broker_partitions)
            if assignments:
                assignment = decisions.check_assignments(assignments, self._live_ids())
            else:
                assignment = decisions.assign_replicas(
                    self._placements(), num_partitions, replication_factor, rng=self._rng
                )
            self._check_cap(assignment)
            topic = StoredTopic(name, uuid.uuid4(), assignment, dict(configs))
            if not validate_only:
                await self.store.create_topic(topic)
            return topic

    async def create_partitions(
        self,
        name: str,
        new_total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> dict[int, tuple[int, ...]]:
        """Check and store a topic's new partitions; returns their assignment."""
        async with self._lock:
            topic = self._existing(name)
            current = len(topic.assignment)
            if new_total < current:
                raise KafkaError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {current} partitions, which is higher than the requested "
                    f"{new_total}.",
                )
            if new_total == current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
            decisions.check_partition_count_fits(
                new_total - current, len(self._live_ids()), self.max_broker_partitions
            )
            if assignments is not None:
                if len(assignments) != new_total - current:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Increasing the number of partitions by {new_total - current} but "
                        f"{len(assignments)} assignments provided.",
                    )
                added = decisions.check_assignments(
                    dict(enumerate(assignments, start=current)), self._live_ids(), current
                )
            else:
                replication_factor = len(next(iter(topic.assignment.values())))
                added = decisions.assign_replicas(
                    self._placements(), new_total - current, replication_factor, current, self._rng
                )
            self._check_cap(added)
            if not validate_only:
                await self.store.add_partitions(name, added)
            return added

    async def delete_topic(self, name: str) -> StoredTopic:
        """Request the topic's deletion; returns what is being deleted."""
        async with self._lock:
            topic = self._existing(name)
            await self.store.request_deletion(name)
            return topic

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides (already validated by the caller)."""
        async with self._lock:
            self._existing(name)
            await self.store.set_topic_configs(name, configs)
        log.info("Topic %s config overrides are now %s", name, dict(configs) or "none")

    # -- checks ----------------------------------------------------------------------------------

    def _existing(self, name: str) -> StoredTopic:
        topic = self.store.topics().get(name)
        if topic is None or topic.marked_for_deletion:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        return topic

    def _check_new_name(self, name: str) -> None:
        validate_topic_name(name)
        topics = self.store.topics()
        if name in topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        key = collision_key(name)
        clash = next((t for t in topics if collision_key(t) == key), None)
        if clash is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {clash}"
            )

    def _check_cap(self, added: Mapping[int, Sequence[int]]) -> None:
        current = decisions.replicas_per_broker(
            replicas for topic in self.store.topics().values() for replicas in topic.assignment.values()
        )
        decisions.check_broker_partition_cap(current, added, self.max_broker_partitions)

    def _live_ids(self) -> set[int]:
        return {b.broker_id for b in self._live_brokers()}

    def _placements(self) -> list[decisions.BrokerPlacement]:
        return [decisions.BrokerPlacement(b.broker_id, b.rack) for b in self._live_brokers()]
