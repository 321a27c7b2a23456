"""Bounded fault runs (src/odradek/testing/chaos.py) on three real brokers under idempotent acks=all
loads from confluent-kafka and kafka-python, with fixed seeds:
- twelve cycles of process faults: kill -9 (a random broker, a partition's leader, the controller)
  and SIGSTOP (past replica.lag.time.max.ms, sometimes past the ZooKeeper session), on brokers
  whose ZooKeeper and inbound links pass TCP proxies (testing/links.py);
- ten cycles of proxy faults only: a broker cut from ZooKeeper (within or past its session), a
  broker or a partition's leader isolated from the rest of the cluster and the clients, and a slowed
  ZooKeeper or inbound link;
- ten cycles of host faults on brokers in network namespaces of their own (testing/netns.py), a
  third of them with a second fault on another broker at once: link down, a leader split from the
  other brokers, partial and one-way partitions, a cut from ZooKeeper only, packet loss. Without
  root or nftables they run as the nearest proxy faults (the result says so).

What must hold: no acknowledged record lost, none written twice, offsets dense, every acknowledged
record read where it was acknowledged, nothing read that nobody sent, every replica byte-identical
to its leader, no fatal producer error, and no group offset committed below one whose commit was
acknowledged; and the cluster heals by itself after each fault and at the end, within 30 s of the
heal: every live broker in the controller's channel, every ISR full, every broker's metadata as
ZooKeeper has it, an acks=all record accepted by every partition (testing/liveness.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.testing.chaos import (
    HOST_KINDS,
    PROCESS_KINDS,
    PROXY_KINDS,
    ChaosResult,
    ChaosSettings,
    run_chaos,
)
from odradek.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.slow

SEED = 20261126
CYCLES = 12
NETWORK_SEED = 20261127
NETWORK_CYCLES = 10
HOST_SEED = 20261128
HOST_CYCLES = 10


def assert_promise_held(result: ChaosResult, cycles: int) -> None:
    report = json.dumps(result.to_json(), indent=1)[:20_000]
    assert result.error is None, report
    assert len({fault.cycle for fault in result.faults}) == cycles, report
    assert result.acked > 0 and result.fatal == [], report
    assert min(result.acked_by.get(c, 0) for c in ("confluent-kafka", "kafka-python")) > 0, report
    assert result.lost == [], report
    assert result.duplicated == {}, report
    assert result.holes == {}, report
    assert result.unexpected == [] and result.misplaced == {}, report
    assert result.divergent == {}, report
    assert result.stuck == [], report + result.liveness_report
    assert result.liveness_checks == cycles + 1, report  # after each cycle's heal and after the run
    assert result.group_commits > 0 and result.commit_regressions == [], report


def test_no_acknowledged_record_is_lost_under_crashes_and_pauses(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    settings = ChaosSettings(seed=SEED, cycles=CYCLES, kinds=PROCESS_KINDS)
    result = run_chaos(tmp_path, settings, zookeeper_connect=zookeeper.connect_string)
    assert_promise_held(result, CYCLES)


def test_no_acknowledged_record_is_lost_under_network_faults(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    settings = ChaosSettings(seed=NETWORK_SEED, cycles=NETWORK_CYCLES, kinds=PROXY_KINDS)
    result = run_chaos(tmp_path, settings, zookeeper_connect=zookeeper.connect_string)
    assert_promise_held(result, NETWORK_CYCLES)


def test_no_acknowledged_record_is_lost_under_partitions_loss_and_two_faults_at_once(tmp_path: Path) -> None:
    settings = ChaosSettings(seed=HOST_SEED, cycles=HOST_CYCLES, kinds=HOST_KINDS, overlap=0.3)
    result = run_chaos(tmp_path, settings)
    assert_promise_held(result, HOST_CYCLES)
    assert len(result.faults) > HOST_CYCLES, "no cycle had two faults at once"
