"""Consumer groups and committed offsets (Kafka's classic group coordinator) and transactions
(Kafka's transaction coordinator).

Module map (dependencies point down):
- `coordinator.py`: `GroupCoordinator`, what handlers call (`broker.group_coordinator`): routing by
  group to the shard of its `__consumer_offsets` partition, leadership, creating the topic.
- `shard.py`: one single-writer task per led partition: replay on load, events in order, appends
  with acks=-1 before state changes take effect, timers on the injected clock.
- `classic.py`: the group state machine as pure decisions (`Decision`: next group, replies, records).
- `loader.py`: replaying a partition's records into groups.
- `group.py`: the immutable values (`Group`, `Member`, `CommittedOffset`, `GroupState`, `Now`).
- `records.py`: the key/value byte formats of `__consumer_offsets` (Kafka's).
- `partitioning.py`: `partition_for(group_id, partitions)`, Kafka's hash.
- `consumer_protocol.py`: reading subscriptions and assignments of the "consumer" protocol.
- `config.py`: `GroupConfig`, the coordinator's settings by Kafka's config names.
- `txn_coordinator.py`: `TransactionCoordinator` (`broker.txn_coordinator`): the transaction APIs,
  one shard per led `__transaction_state` partition, markers, timeouts.
- `txn_markers.py`: `TxnMarkerChannel`, markers to local partitions or to their leaders.
- `txn_metadata.py`: a transactional id's state (`TxnMetadata`, `TxnState`) and pure transitions.
- `txn_records.py`: the key/value byte formats of `__transaction_state` (Kafka's).
"""
