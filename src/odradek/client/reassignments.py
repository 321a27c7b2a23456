"""The AlterPartitionReassignments request of a set of targets, as `odradek reassign-partitions` and
the console's reassignment page send it.

Callers: cli/reassign_partitions.py, console/reassignment_pages.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest


def alter_reassignments_request(
    targets: Mapping[tuple[str, int], list[int] | None],
) -> AlterPartitionReassignmentsRequest:
    """Each (topic, partition)'s target replicas (None: cancel its reassignment), grouped by topic in
    name and partition order."""
    by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
    for (topic, index), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=index, replicas=replicas)
        )
    return AlterPartitionReassignmentsRequest(
        topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(t, p) for t, p in by_topic.items()]
    )
