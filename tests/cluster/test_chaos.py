"""Bounded fault runs (src/odradek/testing/chaos.py) on three real brokers whose ZooKeeper and inbound
links each pass a TCP proxy (testing/links.py), under an idempotent acks=all load, with fixed seeds:
- twelve cycles of process faults: kill -9 (a random broker, a partition's leader, the controller)
  and SIGSTOP (past replica.lag.time.max.ms, sometimes past the ZooKeeper session);
- ten cycles of network faults only: a broker cut from ZooKeeper (within or past its session), a
  broker or a partition's leader isolated from the rest of the cluster and the clients, and a slowed
  ZooKeeper or inbound link.

What must hold: no acknowledged record lost, none written twice, offsets dense, every acknowledged
record read where it was acknowledged, nothing read that nobody sent, every replica byte-identical
to its leader, every ISR full again after each fault, and no fatal producer error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.testing.chaos import NETWORK_KINDS, PROCESS_KINDS, ChaosResult, ChaosSettings, run_chaos
from odradek.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.slow

SEED = 20261126
CYCLES = 12
NETWORK_SEED = 20261127
NETWORK_CYCLES = 10


def assert_promise_held(result: ChaosResult, cycles: int) -> None:
    report = json.dumps(result.to_json(), indent=1)[:20_000]
    assert result.error is None, report
    assert len(result.faults) == cycles, report
    assert result.acked > 0 and result.fatal == [], report
    assert result.lost == [], report
    assert result.duplicated == {}, report
    assert result.holes == {}, report
    assert result.unexpected == [] and result.misplaced == {}, report
    assert result.divergent == {}, report
    assert result.stuck == [], report


def test_no_acknowledged_record_is_lost_under_crashes_and_pauses(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    settings = ChaosSettings(seed=SEED, cycles=CYCLES, kinds=PROCESS_KINDS)
    result = run_chaos(tmp_path, settings, zookeeper_connect=zookeeper.connect_string)
    assert_promise_held(result, CYCLES)


def test_no_acknowledged_record_is_lost_under_network_faults(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    settings = ChaosSettings(seed=NETWORK_SEED, cycles=NETWORK_CYCLES, kinds=NETWORK_KINDS)
    result = run_chaos(tmp_path, settings, zookeeper_connect=zookeeper.connect_string)
    assert_promise_held(result, NETWORK_CYCLES)
