"""A bounded fault run (src/odradek/testing/chaos.py) on three real brokers: with a fixed seed, twelve
cycles of kill -9 (a random broker, a partition's leader, the controller) and SIGSTOP (past
replica.lag.time.max.ms, sometimes past the ZooKeeper session) under an idempotent acks=all load.

What must hold: no acknowledged record lost, none written twice, offsets dense, every acknowledged
record read where it was acknowledged, nothing read that nobody sent, every replica byte-identical
to its leader, every ISR full again after each fault, and no fatal producer error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.testing.chaos import ChaosSettings, run_chaos
from odradek.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.slow

SEED = 20261126
CYCLES = 12


def test_no_acknowledged_record_is_lost_under_crashes_and_pauses(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    settings = ChaosSettings(seed=SEED, cycles=CYCLES)
    result = run_chaos(tmp_path, settings, zookeeper_connect=zookeeper.connect_string)
    report = json.dumps(result.to_json(), indent=1)[:20_000]
    assert result.error is None, report
    assert len(result.faults) == CYCLES, report
    assert result.acked > 0 and result.fatal == [], report
    assert result.lost == [], report
    assert result.duplicated == {}, report
    assert result.holes == {}, report
    assert result.unexpected == [] and result.misplaced == {}, report
    assert result.divergent == {}, report
    assert result.stuck == [], report
