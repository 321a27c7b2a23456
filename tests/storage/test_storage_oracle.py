"""Model oracle: random appends, reads, rolls, truncations, retention and reopenings of a Log with
small segments, checked step by step against a plain in-memory model of batches."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from odradek.clock import ManualClock
from odradek.protocol.records.batch import iter_batches
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.protocol.records.compression import CompressionType
from odradek.protocol.records.record import decode_records
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.log import Log


@dataclass(frozen=True)
class ModelBatch:
    base: int
    timestamps: tuple[int, ...]
    values: tuple[bytes, ...]
    size: int

    @property
    def last(self) -> int:
        return self.base + len(self.values) - 1


records_strategy = st.lists(
    st.tuples(st.integers(0, 10_000), st.binary(max_size=200)), min_size=1, max_size=5
)


class LogOracle(RuleBasedStateMachine):
    @initialize(segment_bytes=st.integers(300, 3_000), index_interval=st.integers(0, 600))
    def open(self, segment_bytes: int, index_interval: int) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="oracle-"))
        self.config = LogConfig(
            segment_bytes=segment_bytes, index_interval_bytes=index_interval, retention_ms=-1
        )
        self.clock = ManualClock()
        self.log = Log(self.root / "t-0", self.config, self.clock)
        self.batches: list[ModelBatch] = []
        self.log_start_offset = 0
        self.log_end_offset = 0

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
            shutil.rmtree(self.root)

    @rule(
        batches=st.lists(records_strategy, min_size=1, max_size=3),
        codec=st.sampled_from(list(CompressionType)),
    )
    def append(self, batches: list[list[tuple[int, bytes]]], codec: CompressionType) -> None:
        encoded = [build_batch([SimpleRecord(v, timestamp=t) for t, v in batch], codec) for batch in batches]
        info = self.log.append_as_leader(memoryview(b"".join(encoded)), 3)
        assert info.first_offset == self.log_end_offset
        for batch, data in zip(batches, encoded, strict=True):
            timestamps, values = zip(*batch, strict=True)
            self.batches.append(ModelBatch(self.log_end_offset, timestamps, values, len(data)))
            self.log_end_offset += len(batch)
        assert info.last_offset == self.log_end_offset - 1

    @precondition(lambda self: self.log_end_offset > self.log_start_offset)
    @rule(data=st.data(), max_bytes=st.integers(1, 4_000), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        fetch = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        high_watermark = data.draw(st.just(self.log_end_offset) | st.integers(fetch, self.log_end_offset))
        info = self.log.read(fetch, max_bytes, high_watermark, min_one)
        raw = b"".join(os.pread(part.fd, part.length, part.offset) for part in info.records)
        assert len(raw) == info.total_bytes
        got = [(h.base_offset, h.size_in_bytes) for _, h in iter_batches(raw)]
        assert sum(size for _, size in got) == len(raw)  # whole batches only
        if not got:
            self._check_empty_read(fetch, high_watermark, max_bytes, min_one)
            return
        expected = [b for b in self.batches if b.last >= fetch]
        assert [(b.base, b.size) for b in expected[: len(got)]] == got
        assert expected[len(got) - 1].last < high_watermark
        assert len(raw) <= max_bytes or (min_one and len(got) == 1)
        records = decode_records(raw)
        model = [
            (b.base + i, b.values[i], b.timestamps[i])
            for b in expected[: len(got)]
            for i in range(len(b.values))
        ]
        assert [(r.offset, r.value, r.timestamp) for r in records] == model
        self._check_maximal(
            info.fetch_offset_metadata.segment_base_offset,
            expected[len(got) :],
            high_watermark,
            len(raw),
            max_bytes,
        )

    def _check_empty_read(self, fetch: int, high_watermark: int, max_bytes: int, min_one: bool) -> None:
        if fetch >= high_watermark:
            return
        first = next(b for b in self.batches if b.last >= fetch)
        assert first.last >= high_watermark or (not min_one and first.size > max_bytes)

    def _check_maximal(
        self, segment_base: int, rest: list[ModelBatch], high_watermark: int, total: int, max_bytes: int
    ) -> None:
        bases = [s.base_offset for s in self.log.segments]
        next_segment = next((base for base in bases if base > segment_base), None)
        if not rest or (next_segment is not None and rest[0].base >= next_segment):
            return
        assert rest[0].last >= high_watermark or total + rest[0].size > max_bytes

    @rule(fetch=st.integers(-5, 5))
    def read_out_of_range(self, fetch: int) -> None:
        offset = self.log_end_offset + 1 + abs(fetch) if fetch >= 0 else self.log_start_offset + fetch
        with pytest.raises(OffsetOutOfRangeError):
            self.log.read(offset, 100)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        self.log.truncate_to(offset)
        if offset <= self.log.segments[0].base_offset and offset < self.log_end_offset:
            self.batches, self.log_start_offset, self.log_end_offset = [], offset, offset
            return
        self.batches = [b for b in self.batches if b.last < offset]
        self.log_end_offset = self.batches[-1].last + 1 if self.batches else self.log_end_offset
        if not self.batches:
            self.log_end_offset = self.log.log_end_offset

    @rule(keep_bytes=st.integers(0, 5_000))
    def retention_by_size(self, keep_bytes: int) -> None:
        self.log.update_config(LogConfig(**{**_fields(self.config), "retention_bytes": keep_bytes}))
        self.log.delete_retention_segments(self.clock.time_ms())
        self.log.update_config(self.config)
        self.log_start_offset = (
            self.log.segments[0].base_offset
            if self.log.segments[0].base_offset > self.log_start_offset
            else self.log_start_offset
        )
        self.batches = [b for b in self.batches if b.last >= self.log_start_offset]
        assert self.log.active_segment.base_offset <= self.log_end_offset

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        recovery_point, start = self.log.recovery_point, self.log.log_start_offset
        if clean:
            self.log.close()
        else:
            self.log.files.close_all()
        self.log = Log(
            self.root / "t-0", self.config, self.clock, recovery_point, start, clean_shutdown=clean
        )

    @precondition(lambda self: self.batches)
    @rule(wanted=st.integers(0, 10_001))
    def offset_for_timestamp(self, wanted: int) -> None:
        found = self.log.offset_for_timestamp(wanted)
        model = [
            (b.base + i, t)
            for b in self.batches
            for i, t in enumerate(b.timestamps)
            if t >= wanted and b.base + i >= self.log_start_offset
        ]
        if not model:
            assert found is None
        else:
            assert (found.offset, found.timestamp) == model[0]

    @invariant()
    def offsets_match(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.log_start_offset == self.log_start_offset
        segments = self.log.segments
        assert all(a.next_offset <= b.base_offset for a, b in zip(segments, segments[1:], strict=False))
        assert segments[-1].next_offset == self.log_end_offset


def _fields(config: LogConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


TestLogOracle = pytest.mark.slow(LogOracle.TestCase)
TestLogOracle.settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
