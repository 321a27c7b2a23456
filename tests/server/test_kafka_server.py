"""The KafkaServer wiring in-process: admin changes go through the store and the controller to the
ReplicaManager, the metadata cache and the logs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.clock import ManualClock
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.server.config import KafkaConfig
from odradek.server.kafka_server import KafkaServer


def make_config(data: Path, **overrides: str) -> KafkaConfig:
    return KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data), **overrides})


async def create(broker: KafkaServer, name: str, partitions: int, configs: dict[str, str]) -> None:
    topic = await broker.admin.create_topic(name, partitions, 1, configs)
    assert await broker.wait_for_leaders(name, topic.assignment, 10)


def run(scenario):
    async def wrapper():
        return await asyncio.wait_for(scenario(), 30)

    return asyncio.run(wrapper())


def test_topic_lifecycle_reaches_partitions_and_logs(tmp_path):
    async def scenario():
        broker = KafkaServer(make_config(tmp_path), ManualClock())
        await broker.start()
        try:
            (endpoint,) = broker.advertised_endpoints()
            assert endpoint.listener == "PLAINTEXT" and endpoint.host == "127.0.0.1" and endpoint.port > 0
            assert broker.metadata_cache.brokers()[0].endpoints == (endpoint,)
            await create(broker, "orders", 2, {"retention.ms": "1000"})
            partition = broker.replica_manager.partition("orders", 1)
            assert partition is not None and partition.is_leader
            assert (tmp_path / "orders-1").is_dir()
            assert broker.log_manager.get_log("orders", 0).config.retention_ms == 1000
            await broker.admin.alter_topic_configs("orders", {"retention.ms": "2000"})
            assert broker.log_manager.get_log("orders", 0).config.retention_ms == 2000
            assert broker.metadata_cache.topic("orders").configs == {"retention.ms": "2000"}
            await broker.admin.create_partitions("orders", 3)
            assert await broker.wait_for_leaders("orders", [2], 10)
            await broker.admin.delete_topic("orders")
            assert await broker.wait_for_deletion("orders", 10)
            assert broker.replica_manager.partition("orders", 0) is None
        finally:
            await broker.shutdown()

    run(scenario)
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_restart_takes_up_existing_partitions_with_a_new_leader_epoch(tmp_path):
    async def first_run():
        broker = KafkaServer(make_config(tmp_path))
        await broker.start()
        await create(broker, "kept", 1, {})
        epoch = broker.replica_manager.partition("kept", 0).leader_epoch
        await broker.shutdown()
        return epoch

    async def second_run():
        broker = KafkaServer(make_config(tmp_path))
        await broker.start()
        try:
            assert await broker.wait_for_leaders("kept", [0], 10)
            partition = broker.replica_manager.partition("kept", 0)
            return partition.leader_epoch if partition is not None else None
        finally:
            await broker.shutdown()

    before = run(first_run)
    assert run(second_run) == before + 1


def test_auto_created_topics_use_broker_defaults(tmp_path):
    async def scenario():
        broker = KafkaServer(
            make_config(tmp_path, **{"num.partitions": "4", "offsets.topic.num.partitions": "3"})
        )
        await broker.start()
        try:
            plain = await broker.auto_create_topic("plain")
            offsets = await broker.auto_create_topic("__consumer_offsets")
        finally:
            await broker.shutdown()
        return plain, offsets

    plain, offsets = run(scenario)
    assert len(plain.partitions) == 4 and plain.configs == {}
    assert len(offsets.partitions) == 3 and offsets.is_internal
    assert offsets.configs["cleanup.policy"] == "compact"


def test_periodic_tasks_checkpoint_the_logs(tmp_path):
    """The periodic jobs are registered with the broker's scheduler and run on its injected clock:
    real time alone does not run the checkpoint, advancing the clock past its interval does."""
    clock = ManualClock()

    async def scenario():
        config = make_config(tmp_path, **{"log.flush.offset.checkpoint.interval.ms": "20"})
        broker = KafkaServer(config, clock)
        await broker.start()
        try:
            assert {job.name for job in broker.scheduler.jobs() if job.periodic} >= {
                "log-retention",
                "log-flusher",
                "log-cleaner",
                "log-checkpoint",
                "high-watermark-checkpoint",
            }
            await create(broker, "ticking", 1, {})
            checkpoint = tmp_path / "recovery-point-offset-checkpoint"
            await asyncio.sleep(0.1)
            written_before = "ticking 0" in checkpoint.read_text()
            clock.advance(20)
            for _ in range(100):
                if "ticking 0" in checkpoint.read_text():
                    return written_before, True
                await asyncio.sleep(0.02)
            return written_before, False
        finally:
            await broker.shutdown()

    assert run(scenario) == (False, True)


def test_producer_id_expiration_ms_reaches_the_logs(tmp_path):
    """An idempotent producer idle for producer.id.expiration.ms is forgotten by the retention run;
    with Kafka's default (a day) it would still be known."""
    clock = ManualClock()
    idle_ms = 5000

    async def scenario():
        broker = KafkaServer(make_config(tmp_path, **{"producer.id.expiration.ms": str(idle_ms)}), clock)
        await broker.start()
        try:
            await create(broker, "idempotent", 1, {})
            log = broker.log_manager.get_log("idempotent", 0)
            record = SimpleRecord(b"v", timestamp=clock.time_ms())
            log.append_as_leader(build_batch([record], producer_id=7, base_sequence=0), 0)
            broker.log_manager.run_retention(clock.time_ms() + idle_ms - 1)
            known_before = log.producer_state.last_entry(7) is not None
            broker.log_manager.run_retention(clock.time_ms() + idle_ms)
            return known_before, log.producer_state.last_entry(7) is not None
        finally:
            await broker.shutdown()

    assert run(scenario) == (True, False)


def test_a_started_broker_settles_the_collector() -> None:
    """`odradek serve` freezes start-up's objects and raises the collector's young threshold."""
    import gc

    from odradek.server.kafka_server import GC_THRESHOLDS, settle_collector

    before = gc.get_threshold()
    try:
        settle_collector()
        assert gc.get_threshold() == GC_THRESHOLDS and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
