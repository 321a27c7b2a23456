"""Consumer groups and committed offsets (Kafka's group coordinator: classic groups and KIP-848
consumer-protocol groups), transactions (Kafka's transaction coordinator) and share-partition state
(Kafka's share coordinator, KIP-932), state machines over one coordinator runtime.

Module map (dependencies point down):
- `coordinator.py`: `GroupCoordinator`, what handlers call (`broker.group_coordinator`): routing by
  group to the shard of its `__consumer_offsets` partition, leadership, creating the topic
  (`CoordinatorTopic`); the Protocols both coordinators take from the broker (`ClusterMetadata`,
  `InternalTopicCreator`).
- `txn_coordinator.py`: `TransactionCoordinator` (`broker.txn_coordinator`): the transaction APIs
  routed to the shard of the id's `__transaction_state` partition, verification, descriptions.
- `shard.py`: `GroupCoordinatorShard`, the groups of one led partition: replay on load, pure
  decisions applied once their records are committed, group timers.
- `txn_shard.py`: `TxnShard`, the transactional ids of one led partition: transitions, markers in
  the background, timeouts and expiration.
- `runtime.py`: the coordinator runtime under both: one context per led partition (load event,
  single writer, append with acks=-1 then apply, the append error map, timers on the injected
  clock, closing with NOT_COORDINATOR); `ReplicaManagerLog`, its access to the partitions.
- `classic.py`: the group state machine as pure decisions (`Decision`: next group, replies, records).
- `consumer_group.py`: KIP-848 consumer-protocol groups (ConsumerGroupHeartbeat /
  ConsumerGroupDescribe): their immutable values and pure decisions (epochs, target assignment,
  reconciliation, fencing, timers); their offsets are kept by the classic `Group` of the same id.
- `migration.py`: online migration between classic and consumer groups
  (group.consumer.migration.policy): the upgrade of a classic group, and the JoinGroup / SyncGroup /
  Heartbeat / LeaveGroup of classic members of a consumer group, as pure decisions.
- `consumer_records.py`: the ConsumerGroup* records of `__consumer_offsets` (Kafka 4's, through the
  generated codecs) and their replay.
- `share_group.py`: KIP-932 share groups' membership (ShareGroupHeartbeat / ShareGroupDescribe):
  their immutable values and pure decisions (epochs, target assignment without revocation, session
  fencing, the offsets APIs' group checks); `share_assignor.py`: the `simple` share assignor (pure);
  `share_group_records.py`: the ShareGroup* records of `__consumer_offsets` and their replay.
- `loader.py`: replaying a partition's records into groups (consumer-protocol groups through
  `consumer_records.py`).
- `group.py`: the immutable values (`Group`, `Member`, `CommittedOffset`, `GroupState`, `Now`).
- `records.py`: the key/value byte formats of `__consumer_offsets` (Kafka's).
- `partitioning.py`: `partition_for(group_id, partitions)`, Kafka's hash.
- `assignors.py`: the KIP-848 server-side assignors `uniform` and `range` (pure), and choosing one
  from group.consumer.assignors.
- `consumer_protocol.py`: reading subscriptions and assignments of the "consumer" protocol.
- `config.py`: `GroupConfig`, the coordinator's settings by Kafka's config names; `ConfigValues`.
- `txn_markers.py`: `TxnMarkerChannel`, markers to local partitions (a `MarkerWriter`) or to their
  leaders.
- `txn_metadata.py`: a transactional id's state (`TxnMetadata`, `TxnState`) and pure transitions.
- `txn_records.py`: the key/value byte formats of `__transaction_state` (Kafka's).
- `share_coordinator.py`: `ShareCoordinator` (`broker.share_coordinator`), the durable state of
  share-partitions (KIP-932) in `__share_group_state`: its shards (`ShareStateShard`) on the runtime,
  reads, initializations, writes and deletions of a share-partition's state.
- `share_records.py`: the ShareSnapshot / ShareUpdate records of `__share_group_state` (Kafka's,
  through the generated codecs), their replay and merge; `StateKey`, Kafka's `group:topicId:partition`.
- `share_partition.py`: `SharePartition`, one share-partition's in-flight records on its partition
  leader as a pure state machine (acquisition, locks, acknowledgements, start offset); the leader's
  side (sessions, reads, persistence) is server/share_partitions.py.

Nothing here imports the server layer: the broker hands each coordinator the objects that satisfy
its Protocols (the metadata cache, itself for topic creation and local markers, the ReplicaManager
through `ReplicaManagerLog`, the ProducerIdManager).
"""
