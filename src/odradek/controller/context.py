"""The state the controller's event handlers share (Kafka's ControllerContext).

Owns, while this broker is controller: its id and controller epoch, the live brokers (with their
broker epochs) and the channel's membership, which follows them (`set_live_brokers`), the brokers in
controlled shutdown, the broker-wide default of unclean.leader.election.enable, the metadata store
and the channel to the brokers; and the few rules every handler reads them by: which brokers may be
elected or join an ISR, whether a topic allows unclean elections, whether a broker's epoch is stale,
and the fenced write of partition states.

Invariants: one `ControllerContext` per controller, changed only by its event handlers (one event at a
time) and by its life cycle; every partition state written goes through the store fenced by `epoch`.

Callers: `Controller` (controller/controller.py) builds it and hands it to the handlers of each concern
(membership.py, topics.py, isr_changes.py, controlled_shutdown.py, elections.py,
partition_reassignments.py) and to sending.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from odradek.controller.channel import ControllerChannel, ControllerIdentity, TopicStates
from odradek.controller.metadata import BrokerInfo, PartitionState
from odradek.controller.store import MetadataStore, StoredTopic

UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"


@dataclass(frozen=True, slots=True)
class LiveChange:
    """How the live brokers changed: the ids that joined and those that left."""

    joined: set[int]
    left: set[int]


@dataclass(eq=False, slots=True)
class ControllerContext:
    """See the module docstring."""

    broker_id: int
    store: MetadataStore
    channel: ControllerChannel
    unclean_default: bool = False  # the broker's unclean.leader.election.enable, dynamic configs included
    epoch: int = 0
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)  # of the live brokers, when known
    shutting_down: set[int] = field(default_factory=set)

    async def set_live_brokers(self, live: Iterable[BrokerInfo], epochs: Mapping[int, int]) -> LiveChange:
        """Make `live` (with their broker `epochs`, those known) the live brokers, and the channel
        reach exactly them, in one step: the one place either changes, so every broker the
        controller counts as live is in its channel."""
        before = set(self.live_brokers)
        self.live_brokers = {b.broker_id: b for b in live}
        self.broker_epochs = {b: epochs[b] for b in self.live_brokers if b in epochs}
        self.shutting_down &= set(self.live_brokers)
        await self.channel.sync_brokers(self.live_brokers.values())
        return LiveChange(set(self.live_brokers) - before, before - set(self.live_brokers))

    def identity(self) -> ControllerIdentity:
        return ControllerIdentity(self.broker_id, self.epoch)

    def eligible(self) -> set[int]:
        """The live brokers that may be elected leader or join an ISR: not shutting down."""
        return set(self.live_brokers) - self.shutting_down

    def unclean(self, topic: StoredTopic) -> bool:
        value = topic.configs.get(UNCLEAN_LEADER_ELECTION)
        return self.unclean_default if value is None else value.strip().lower() == "true"

    def stale(self, broker_id: int, broker_epoch: int, required: bool = False) -> bool:
        """A broker epoch other than the broker's registration's. -1 is not checked unless
        `required` (AlterPartition always carries one; ControlledShutdown v1 has none)."""
        registered = self.store.broker_epochs().get(broker_id)
        if registered is None or (broker_epoch == -1 and not required):
            return False
        return broker_epoch != registered

    async def write_states(self, states: Mapping[str, Mapping[int, PartitionState]]) -> TopicStates:
        """Write `states` fenced by this controller's epoch; return them as the store now holds them
        (its partition epochs; a state another writer moved is re-read), to tell the brokers."""
        await self.store.write_partition_states(states, self.epoch)
        topics = self.store.topics()
        return {
            name: (
                topics[name].topic_id,
                {i: topics[name].states[i] for i in written if i in topics[name].states},
            )
            for name, written in states.items()
            if name in topics
        }
