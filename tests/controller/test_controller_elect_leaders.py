"""Elections an admin asks of the controller (ElectLeaders): preferred and unclean, written fenced
and sent as LeaderAndIsr and UpdateMetadata before the answer; per-partition refusals; every
partition when none is named; NOT_CONTROLLER from a controller that stopped."""

from __future__ import annotations

from odradek.controller.decisions import ElectionType
from odradek.controller.elections import ElectionResult
from odradek.controller.metadata import NO_LEADER, PartitionState
from odradek.protocol.errors import ErrorCode
from tests.controller.test_controller_membership import BROKERS, Cluster, _started_with_topic
from tests.controller.test_local_controller import error_code, run

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


async def _preferred_lost(cluster: Cluster) -> None:
    """Broker 1 goes and comes back: partition 1 (replicas 1, 2) is then led by 2, not its preferred 1."""
    cluster.controller.brokers_changed([BROKERS[0], BROKERS[2]])
    await cluster.controller.idle()
    cluster.controller.brokers_changed(BROKERS.values())
    await cluster.controller.idle()
    cluster.remote.sent.clear()


def test_a_preferred_election_moves_leadership_back_and_tells_the_brokers(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await _preferred_lost(cluster)
        assert cluster.states()[1].leader == 2
        before = cluster.states()[1]
        # the ISR change a real leader would ask for once 1 caught up
        await cluster.store.write_partition_states(
            {"t": {1: PartitionState(2, before.leader_epoch, (1, 2), (2, 1), 1, before.partition_epoch)}}, 1
        )
        results = await cluster.controller.elect_leaders(PREFERRED, [("t", 1), ("t", 0), ("t", 9)])
        after = cluster.states()[1]
        assert (after.leader, after.leader_epoch) == (1, before.leader_epoch + 1)
        assert results == {
            ("t", 1): ElectionResult(1),
            ("t", 0): ElectionResult(0, ErrorCode.ELECTION_NOT_NEEDED),
            ("t", 9): ElectionResult(
                NO_LEADER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            ),
        }
        sent = [(api, broker) for api, broker, _ in cluster.remote.sent]
        assert ("LeaderAndIsr", 1) in sent and ("LeaderAndIsr", 2) in sent and ("UpdateMetadata", 1) in sent
        await cluster.controller.shutdown()

    run(scenario)


def test_a_preferred_replica_out_of_the_isr_is_not_elected(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await _preferred_lost(cluster)  # broker 1 is back but not in the ISR of partition 1
        results = await cluster.controller.elect_leaders(PREFERRED, None)
        assert results[("t", 1)].error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert "preferred replica 1 is not live or not in the ISR [2]" in str(results[("t", 1)].message)
        assert {tp: r.error for tp, r in results.items() if tp != ("t", 1)} == {
            ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
            ("t", 2): ErrorCode.ELECTION_NOT_NEEDED,
        }
        assert cluster.states()[1].leader == 2
        await cluster.controller.shutdown()

    run(scenario)


def test_an_unclean_election_brings_an_offline_partition_back_on_a_replica_outside_the_isr(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[1]])  # 2 dies: partition 1 is led by 1
        await cluster.controller.idle()
        cluster.controller.brokers_changed([BROKERS[0]])  # then 1: partition 1 is offline, ISR [1]
        await cluster.controller.idle()
        cluster.controller.brokers_changed([BROKERS[0], BROKERS[2]])  # 2 is back, not in the ISR
        await cluster.controller.idle()
        assert (cluster.states()[1].leader, cluster.states()[1].isr) == (NO_LEADER, (1,))
        assert (await cluster.controller.elect_leaders(PREFERRED, [("t", 1)]))[("t", 1)].error == (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        )
        results = await cluster.controller.elect_leaders(UNCLEAN, [("t", 1), ("t", 0)])
        assert results == {
            ("t", 1): ElectionResult(2),
            ("t", 0): ElectionResult(0, ErrorCode.ELECTION_NOT_NEEDED),
        }
        assert (cluster.states()[1].leader, cluster.states()[1].isr) == (2, (2,))
        await cluster.controller.shutdown()

    run(scenario)


def test_an_unclean_election_without_a_live_replica_fails(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        cluster.controller.brokers_changed([BROKERS[0]])
        await cluster.controller.idle()
        results = await cluster.controller.elect_leaders(UNCLEAN, [("t", 1)])
        assert results[("t", 1)].error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        assert (
            results[("t", 1)].message
            == "Failed to elect leader for partition t-1: none of its replicas [1, 2] is live"
        )
        await cluster.controller.shutdown()

    run(scenario)


def test_a_stopped_controller_refuses(tmp_path):
    async def scenario() -> None:
        cluster = await _started_with_topic(tmp_path)
        await cluster.controller.shutdown()
        assert (
            await error_code(cluster.controller.elect_leaders(PREFERRED, [("t", 0)]))
            == ErrorCode.NOT_CONTROLLER
        )

    run(scenario)
