"""Moves of replicas between this broker's log dirs (KIP-113: Kafka's ReplicaAlterLogDirsManager and
ReplicaAlterLogDirsThread).

Owns the moves in progress: per partition, its future log (`<topic>-<partition>.<id>-future` in
the destination log dir, created and listed by the LogManager) being caught up with the partition's
current log; the copying, in the scheduler's replica-alter-log-dirs lane; and the throttle
`quota`, a `ReplicationQuota` whose rate is the dynamic broker config
replica.alter.log.dirs.io.max.bytes.per.second and which every move counts against (as Kafka's
alter-log-dirs quota).

Behaviour:
- Copying: one chunk at a time (at most replica.fetch.max.bytes), round robin over the moves, in the
  scheduler's "replica-alter-log-dirs" lane: the chunk is read from the current log at the future
  log's end (a local fetch up to the log end offset) and appended to the future log as a follower
  appends (offsets, leader epochs, producer state and aborted transactions kept). Before each chunk
  the future log is put back in line with the current one, as a follower with its leader: past the
  current log's end, or where the leader epochs diverge (the current log was truncated), it is
  truncated; behind the current log start offset it starts over there; its log start offset follows.
- While the quota is exceeded no chunk is copied (looked at again every THROTTLE_RECHECK_S); one
  chunk may pass the rate, the next ones wait until the average is back under it.
- Completion: when a chunk reached the current log's end, the swap runs on the event loop, where no
  append, truncation or read can come between: the tail appended since (at most TAIL_MAX_BYTES, else
  the copy goes on in the thread) is copied, leader epochs started with no batch yet are assigned,
  then `LogManager.replace_current_with_future` renames the directories and the partition serves
  from the new log (`Partition.replace_log`); the worker thread flushes the new log, then deletes
  the old one (the copy was flushed when it reached the end, so only the tail waits for that
  flush). Nothing acknowledged is lost: every offset of the old log is in the new one when they
  swap. A swap that fails (a rename refused) leaves both logs as they were and is tried again; a
  copy that fails is logged and tried again after ERROR_BACKOFF_S. The log cleaner leaves a moving
  partition alone (the LogManager's, as Kafka pauses its cleaning).
- A move ends early when its partition stops here (`remove`; StopReplica) or another destination is
  asked (the ReplicaManager deletes the old future log and starts a new one).
- Restart: a future log found on disk is loaded with its partition, and its move resumes where the
  copy was (the ReplicaManager adds it back); a stop between the swap's two renames is completed by
  the LogManager at start.

Deliberate deviations from Kafka: one worker thread copies every move (Kafka runs
num.replica.alter.log.dirs.threads, one per log dir by default); the last tail is copied on the
event loop instead of under the partition's lock, bounded by TAIL_MAX_BYTES, as the loop is where
appends happen.

Invariants: the moves map lives on the event loop; the worker thread touches only the future logs
and reads the current logs (lock free). Callers: the ReplicaManager (add / remove / destination /
shutdown), the broker (the quota's rate).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from odradek.protocol.topic_partition import TopicPartition
from odradek.replication.partition import Partition
from odradek.replication.quotas import ReplicationQuota
from odradek.scheduler import Lane, Scheduler
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.leader_epoch import UNDEFINED_EPOCH
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.tasks import cancel_and_wait

log = logging.getLogger(__name__)

REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND = "replica.alter.log.dirs.io.max.bytes.per.second"
TAIL_MAX_BYTES = 256 * 1024
THROTTLE_RECHECK_S = 0.2
IDLE_S = 0.05  # a round that copied nothing (every move caught up but its tail too long, or waiting)
ERROR_BACKOFF_S = 1.0


class ReplicaAlterLogDirsManager:
    """The moves between log dirs in progress; see the module docstring."""

    def __init__(
        self,
        log_manager: LogManager,
        partition: Callable[[str, int], Partition | None],
        chunk_bytes: int,
        scheduler: Scheduler,
    ) -> None:
        self.quota = ReplicationQuota(-1)  # no throttled replica lists: every move counts
        self._log_manager = log_manager
        self._partition = partition
        self._chunk_bytes = chunk_bytes
        self._moves: dict[TopicPartition, Log] = {}
        self._scheduler = scheduler
        self._task: asyncio.Task[None] | None = None
        self._cleanups: set[asyncio.Future[None]] = set()
        self._closed = False

    def destination(self, key: TopicPartition) -> Log | None:
        """The future log of the partition's move in progress, or None."""
        return self._moves.get(key)

    def add(self, key: TopicPartition, future: Log) -> None:
        if self._moves.get(key) is future or self._closed:
            return
        self._moves[key] = future
        log.info("Moving %s-%d to %s", *key, future.dir.parent)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="replica-alter-log-dirs")

    def remove(self, key: TopicPartition) -> Log | None:
        """Stop the partition's move (its future log stays where it is); the future log, if any."""
        return self._moves.pop(key, None)

    async def shutdown(self) -> None:
        self._closed = True
        self._moves.clear()
        await cancel_and_wait(self._task)
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)

    # -- the copy --------------------------------------------------------------------------------

    async def _run(self) -> None:
        while self._moves:
            copied_any = False
            for key, future in list(self._moves.items()):
                if self.quota.exceeded():
                    await asyncio.sleep(THROTTLE_RECHECK_S)
                    copied_any = True
                    break
                hosted = self._partition(*key)
                if hosted is None or self._moves.get(key) is not future:
                    continue
                try:
                    copied, at_end = await self._scheduler.run(
                        Lane.ALTER_LOG_DIRS, copy_chunk, hosted.log, future, self._chunk_bytes
                    )
                except Exception:
                    log.exception("Copying %s-%d to %s failed; trying again", *key, future.dir.parent)
                    await asyncio.sleep(ERROR_BACKOFF_S)
                    continue
                self.quota.record(copied)
                copied_any |= copied > 0
                if at_end and self._moves.get(key) is future and self._partition(*key) is hosted:
                    try:
                        self._complete(key, hosted, future)
                    except Exception:
                        log.exception("Swapping in the log of %s-%d failed; trying again", *key)
                        await asyncio.sleep(ERROR_BACKOFF_S)
            if not copied_any:
                await asyncio.sleep(IDLE_S)

    def _complete(self, key: TopicPartition, hosted: Partition, future: Log) -> bool:
        """Event loop: copy the tail and swap the future log in, if the tail is short enough."""
        current = hosted.log
        reconcile(current, future)
        budget = TAIL_MAX_BYTES
        while future.log_end_offset < current.log_end_offset:
            copied = append_next(current, future, budget) if budget > 0 else 0
            if not copied:
                return False
            budget -= copied
        for epoch, start_offset in current.leader_epoch_cache.entries:
            if epoch > future.leader_epoch_cache.latest_epoch:
                future.maybe_assign_epoch_start_offset(epoch, start_offset)
        future.advance_start_offset(current.log_start_offset)
        old = self._log_manager.replace_current_with_future(*key)
        hosted.replace_log(future)
        del self._moves[key]
        log.info("Moved %s-%d from %s to %s", *key, old.dir.parent, future.dir.parent)
        cleanup = asyncio.wrap_future(
            self._scheduler.lanes.submit(Lane.ALTER_LOG_DIRS, _finish_quietly, self._log_manager, old, future)
        )
        self._cleanups.add(cleanup)
        cleanup.add_done_callback(self._cleanups.discard)
        return True


def copy_chunk(current: Log, future: Log, max_bytes: int) -> tuple[int, bool]:
    """Worker thread: put `future` in line with `current` and append the next chunk of `current` to
    it; (bytes copied, whether `future` reached the end `current` had). At the end the future log is
    flushed, so that little is left unsynced when it is swapped in."""
    reconcile(current, future)
    copied = append_next(current, future, max_bytes)
    at_end = future.log_end_offset >= current.log_end_offset
    if at_end:
        future.flush()
    return copied, at_end


def reconcile(current: Log, future: Log) -> None:
    """Truncate `future` where it leaves `current` (past its end, or where their leader epochs
    diverge), start it over at `current`'s log start offset when it is behind it."""
    start = current.log_start_offset
    if future.log_end_offset < start:
        future.truncate_fully_and_start_at(start)
        return
    latest = future.leader_epoch_cache.latest_epoch
    if latest != UNDEFINED_EPOCH:
        theirs = current.leader_epoch_cache.end_offset_for(latest, current.log_end_offset)
        if theirs.leader_epoch == UNDEFINED_EPOCH:
            future.truncate_fully_and_start_at(start)
            return
        ours = future.leader_epoch_cache.end_offset_for(theirs.leader_epoch, future.log_end_offset)
        target = min(theirs.end_offset, ours.end_offset)
    else:
        target = current.log_end_offset
    if target < future.log_end_offset:
        future.truncate_to(target)
    future.advance_start_offset(start)


def append_next(current: Log, future: Log, max_bytes: int) -> int:
    """Append to `future` the batches of `current` from `future`'s end (at most `max_bytes`, or one
    batch); the bytes copied."""
    offset = future.log_end_offset
    if offset >= current.log_end_offset:
        return 0
    try:
        info = current.read(offset, max_bytes)
    except OffsetOutOfRangeError:
        return 0  # retention moved the start meanwhile: the next `reconcile` starts over there
    if not info.records:
        return 0
    data = b"".join(os.pread(piece.fd, piece.length, piece.offset) for piece in info.records)
    base_offset = int.from_bytes(data[:8], "big")
    if base_offset < offset and future.log_start_offset == offset:
        # An empty future log whose start is inside a batch (DeleteRecords): start at the batch.
        future.truncate_fully_and_start_at(base_offset)
    future.append_as_follower(data)
    future.advance_start_offset(current.log_start_offset)
    return len(data)


def _finish_quietly(log_manager: LogManager, old: Log, new: Log) -> None:
    try:
        log_manager.finish_replace(old, new)
    except Exception:
        log.exception("Deleting the old log %s failed", old.dir)
