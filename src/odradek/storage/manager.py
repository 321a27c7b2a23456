"""The broker's logs across its log dirs: loading, creation, deletion, retention, flush, checkpoints.

Owns each `log.dirs` entry's root: the `.lock` file (an exclusive `fcntl.flock`, so two brokers never
share a dir), `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`, the clean
shutdown marker `.kafka_cleanshutdown`, and the partition directories under it; and the broker's
`FileCache` (see `file_cache`: at most `max_open_files` segment fds, active segments included).
`meta.properties` belongs to the server.

Where storage work runs (the rule for the event loop and the worker threads):
- On the event loop: `Log.append_as_leader` / `append_as_follower`, `Log.read`, the offset lookups,
  `maybe_assign_epoch_start_offset`, `get_log` of a loaded log, `replace_current_with_future` (two
  renames). They take a log's lock for
  microseconds and make no blocking system call: positional reads and writes to the page cache,
  at most one `open` when the file cache had closed the segment, and on a roll the index and
  producer snapshot writes without fsync. No fsync ever happens on the loop or under a lock the
  loop takes (`Log._lock`, `FileCache._lock`, this manager's `_lock`).
- In worker threads: everything that fsyncs, scans directories or reads a log in bulk: creating
  and loading logs (`get_or_create_log`, `load_logs`, `get_future_log`, `create_future_log`,
  `delete_future_log`, `finish_replace`), `Log.flush` (the fdatasyncs run outside the
  log's lock), flushes asked by flush.messages / flush.ms (submitted to the log-io lane),
  `flush_dirty`, `run_retention`, `run_cleaner`, `checkpoint` (the leader-epoch files are written
  by the flushes), `delete_log`, `shutdown`. The broker's scheduler (odradek/scheduler.py) runs
  the periodic ones in its lanes; this manager submits its own work (asked flushes to log-io, bulk
  loads and the closing of logs at shutdown to log-load) to the `lanes` it is given (one made
  without them has lanes of its own, stopped by `shutdown`).

Behaviour:
- Construction is cheap whatever the number of partitions: it locks the dirs, reads the checkpoints
  and the clean shutdown marker, lists the `<topic>-<partition>` directories and writes the
  checkpoints back (two small files per dir); it loads nothing. The marker is then removed
  (durably): a log loaded later in this run still knows its files were left by a clean shutdown,
  since nothing touched them in between.
- `get_or_create_log` (any thread) loads a partition present on disk (recovery from its
  checkpointed recovery point included) or creates it in the log dir holding the fewest
  partitions. Different partitions load in parallel; concurrent calls for one partition load it
  once (the others wait for that load). `get_log` answers loaded logs and loads one still on disk.
  `load_logs(partitions, threads, should_stop)` loads many in parallel (Kafka's
  num.recovery.threads.per.data.dir) and yields each log as it is ready; it stops submitting loads
  once `should_stop()` is true or `shutdown` began, so at most `threads` loads finish afterwards.
- Start-up progress (`load_progress`, a `LoadProgress` over the partitions found on disk): each
  such log that loads, and each segment its loading recovers, is counted; an INFO line every 2 s
  gives logs loaded of the total, segments and bytes recovered and the rates, and a summary line
  follows the last one (logs deleted unloaded and those `report_unknown` names are left out).
- Partitions on disk that nobody loads stay on disk untouched: `unloaded_partitions()` lists them
  and `report_unknown(expected)` logs those missing from metadata. The periodic jobs (retention,
  flush, cleaner) visit loaded logs only, and every checkpoint keeps the recovery point and log
  start offset of unloaded partitions as read at start (the cleaner's checkpoint likewise).
- `delete_log` renames the directory to `<topic>-<partition>.<uuid>-delete`, then removes its files
  (a partition still unloaded is removed without loading it); open fds close after
  file.delete.delay.ms (see `FdReaper`). Leftover `*-delete` directories found at start are removed
  by the first retention pass; other names (`-stray`...) are left alone.
- Future logs (a replica moving to another log dir: AlterReplicaLogDirs, replication/alter_log_dirs.py):
  `<topic>-<partition>.<unique id>-future` directories, at most one per partition, in another log
  dir than its current log. Found at start, they stay on disk until `get_future_log` loads them
  (the ReplicaManager does with their partition, and the move resumes); `create_future_log` makes
  one, `delete_future_log` removes it (as does `delete_log`, first). They are flushed, checkpointed
  (in their own dir's files), reconfigured and closed like the current logs, never cleaned nor
  retained; the current log of a partition with a future one is not cleaned either (Kafka pauses
  its cleaning). `replace_current_with_future` swaps a caught-up one in by two renames (the current log
  to `-delete` first, so a stop in between leaves a future log with no current one, which the next
  start promotes to current); `finish_replace` fsyncs the dirs and deletes the old log.
- `log_dir(path)` is the configured log dir at an absolute path; `set_preferred_dir` places a
  partition not created yet in a given dir (Kafka's preferred log dirs), else a new partition goes
  to the log dir holding the fewest.
- `run_retention` / `flush_dirty` are driven by the server's scheduler with the injected clock;
  `run_retention` also forgets idempotent producers idle for producer.id.expiration.ms (Kafka checks
  every producer.id.expiration.check.interval.ms; here it is the retention check interval);
  `checkpoint` (every log.flush.offset.checkpoint.interval.ms) also writes the leader-epoch
  checkpoints changed since their log's last flush, so the file lags its cache by at most that
  interval even for a log that is never flushed. `flush_dirty` flushes the logs whose
  flush.messages / flush.ms is due and every segment rolled
  since the last flush (as Kafka does on roll), which keeps recovery short without fsyncing on the
  append path. Deviation from Kafka: a log whose flush.messages is reached is flushed in the
  log-io lane right after the append, not before the append returns.
- `run_cleaner` compacts the logs whose cleanup.policy contains `compact` (see `cleaner`).
- `shutdown` refuses new loads and asked flushes, waits for the loads in flight, stops the cleaner,
  waits for the asked flushes, closes every loaded log in parallel in the log-load lane (a log
  with nothing unflushed costs no fsync), writes the checkpoints, and writes the clean shutdown
  marker of each dir whose partitions are all clean: a dir that started unclean keeps no marker
  while some of its partitions were never loaded (and so never recovered).
- A full disk (or any failed write) never stops a start or a shutdown: a checkpoint that cannot be
  written is logged and the previous file stays (an older recovery point only costs recovery time);
  a log whose close fails (index tail, producer snapshot) is logged and its dir is not marked clean,
  so the next start recovers it.

Thread safety: the maps of logs are guarded by `_lock`, held only for dictionary work (never while
loading, flushing or writing a file); each `Log` guards itself.

Callers: the broker (construction, creation from metadata, scheduler ticks, shutdown), replication
(get_or_create_log, get_log, delete_log); the controller's partition loading (load_logs).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path

from odradek.clock import Clock
from odradek.durable_file import fsync_dir, write_atomically
from odradek.scheduler import Lane, Lanes
from odradek.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
    read_checkpoint,
    write_checkpoint,
)
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.file_cache import DEFAULT_LEASE_MS, FileCache
from odradek.storage.load_progress import LoadProgress
from odradek.storage.log import (
    FUTURE_DIR_SUFFIX,
    Log,
    dir_name,
    future_dir_name,
    parse_dir_name,
    parse_future_dir_name,
)
from odradek.storage.producer_state import PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A partition directory found at start and not loaded yet, with its checkpointed offsets."""

    directory: Path
    recovery_point: int
    log_start_offset: int
    clean_shutdown: bool


class _Load:
    """One partition being loaded or created; other callers asking for it wait for the result."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.done = threading.Event()
        self.log: Log | None = None
        self.error: BaseException | None = None

    def result(self) -> Log:
        self.done.wait()
        if self.log is None:
            raise KafkaStorageError(f"loading {self.directory.name} failed: {self.error}") from self.error
        return self.log


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[str | os.PathLike[str]],
        default_config: LogConfig,
        clock: Clock,
        topic_configs: Mapping[str, LogConfig] | None = None,
        *,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        cleaner_config: CleanerConfig | None = None,
        max_open_files: int | None = None,
        file_lease_ms: int = DEFAULT_LEASE_MS,
        lanes: Lanes | None = None,
    ) -> None:
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._clock = clock
        self._topic_configs = dict(topic_configs or {})
        self._dirs = [Path(directory) for directory in log_dirs]
        if not self._dirs:
            raise ValueError("at least one log dir is needed")
        self.files = FileCache(clock, max_open_files, lease_ms=file_lease_ms)
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._stored: dict[TopicPartition, StoredLog] = {}
        self._loading: dict[TopicPartition, _Load] = {}
        self._futures: dict[TopicPartition, Log] = {}
        self._stored_futures: dict[TopicPartition, StoredLog] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self._dir_counts = dict.fromkeys(self._dirs, 0)
        self._clean_at_start: dict[Path, bool] = {}
        self._leftovers: list[Path] = []
        self._written_checkpoints: dict[Path, bytes] = {}
        self._closing = False
        self._lanes = lanes if lanes is not None else Lanes()
        self._own_lanes = lanes is None  # a LogManager on its own (tests, tools) stops its lanes
        self._flushes: set[Future[None]] = set()  # asked by appends, waited for by shutdown
        self._lock_fds: list[int] = []
        for directory in self._dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_fds.append(_lock_dir(directory))
        for directory in self._dirs:
            self._list_dir(directory)
        self._promote_orphan_futures()
        self.load_progress = LoadProgress(len(self._stored))
        self._checkpoint_quietly()
        self.cleaner = LogCleaner(self._dirs, self._cleanable_logs, cleaner_config or CleanerConfig())

    # -- start ---------------------------------------------------------------------------------

    def _list_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self._clean_at_start[directory] = clean
        recovery_points = read_checkpoint(directory / RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = read_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT)
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    self._leftovers.append(Path(entry.path))
                    continue
                future = entry.name.endswith(FUTURE_DIR_SUFFIX)
                try:
                    key = TopicPartition(
                        *(parse_future_dir_name(entry.name) if future else parse_dir_name(entry.name))
                    )
                except ValueError:
                    continue
                found = self._stored_futures if future else self._stored
                if key in found:
                    other = found[key].directory
                    raise KafkaStorageError(f"{entry.name} exists in two log dirs: {entry.path}, {other}")
                found[key] = StoredLog(
                    Path(entry.path), recovery_points.get(key, 0), log_start_offsets.get(key, 0), clean
                )
                self._dir_counts[directory] += 1
        if clean:
            marker.unlink()
            fsync_dir(directory)

    def _promote_orphan_futures(self) -> None:
        """A future log without a current one is a move stopped between the two renames of its swap
        (`replace_current_with_future`): the old log was already renamed for deletion, and the future,
        complete, becomes the current log."""
        for key in sorted(self._stored_futures.keys() - self._stored.keys()):
            future = self._stored_futures.pop(key)
            current = future.directory.with_name(dir_name(*key))
            log.warning("%s has no current log: it replaces it (a log dir move was ending)", future.directory)
            os.rename(future.directory, current)
            fsync_dir(current.parent)
            self._stored[key] = StoredLog(
                current, future.recovery_point, future.log_start_offset, future.clean_shutdown
            )

    # -- logs ----------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The loaded log of topic-partition; one still on disk is loaded first; None if neither."""
        key = TopicPartition(topic, partition)
        found = self._logs.get(key)
        if found is not None or (key not in self._stored and key not in self._loading):
            return found
        return self.get_or_create_log(topic, partition)

    def all_logs(self) -> list[Log]:
        """The loaded logs."""
        with self._lock:
            return list(self._logs.values())

    def _cleanable_logs(self) -> list[Log]:
        """The loaded logs of partitions not moving between log dirs (Kafka pauses the cleaning of a
        partition while it has a future log)."""
        with self._lock:
            moving = self._futures.keys() | self._stored_futures.keys()
            return [found for key, found in self._logs.items() if key not in moving]

    def unloaded_partitions(self) -> list[TopicPartition]:
        """Partitions on disk not loaded (yet)."""
        with self._lock:
            return sorted(self._stored.keys() - self._loading.keys())

    def report_unknown(self, expected: Iterable[tuple[str, int]]) -> list[TopicPartition]:
        """Log (and return) the partitions on disk that are not in `expected` (the metadata's): they
        stay on disk, unloaded."""
        unknown = sorted(set(self.unloaded_partitions()) - set(expected))
        if unknown:
            self.load_progress.log_left_out(unknown)
            log.warning(
                "%d partitions on disk are not in metadata and stay unloaded: %s",
                len(unknown),
                ", ".join(f"{topic}-{partition}" for topic, partition in unknown[:20]),
            )
        return unknown

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of topic-partition: loaded from disk if it is there, else created in the emptiest
        log dir. Blocking (runs recovery, creates files): call it from a worker thread."""
        if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise ValueError(f"illegal topic name {topic!r}")
        if partition < 0:
            raise ValueError(f"illegal partition {partition}")
        key = TopicPartition(topic, partition)
        with self._lock:
            found = self._logs.get(key)
            if found is not None:
                return found
            if config is not None:
                self._topic_configs[topic] = config
            pending = self._loading.get(key)
            if pending is not None:
                owner = False
            else:
                if self._closing:
                    raise KafkaStorageError(f"cannot load {topic}-{partition}: the log manager is shut down")
                owner = True
                stored = self._stored.get(key)
                pending = self._loading[key] = _Load(
                    stored.directory if stored is not None else self._place(topic, partition)
                )
        if not owner:
            return pending.result()
        return self._load(key, pending)

    def _place(self, topic: str, partition: int) -> Path:
        """The directory of a new partition: in its preferred log dir if AlterReplicaLogDirs named
        one, else in the log dir holding the fewest (under the lock)."""
        directory = self._preferred_dirs.pop((topic, partition), None) or min(
            self._dirs, key=lambda candidate: self._dir_counts[candidate]
        )
        self._dir_counts[directory] += 1
        return directory / dir_name(topic, partition)

    def _load(self, key: TopicPartition, pending: _Load) -> Log:
        stored = self._stored.get(key)
        if stored is not None:
            self.load_progress.begin()
        try:
            loaded = self._open_log(key, pending.directory, stored)
        except BaseException as exc:
            with self._lock:
                del self._loading[key]
                if stored is None:
                    self._dir_counts[pending.directory.parent] -= 1
            pending.error = exc
            pending.done.set()
            if stored is not None:
                self.load_progress.log_loaded(failed=True)
            raise
        with self._lock:
            del self._loading[key]
            self._stored.pop(key, None)
            self._logs[key] = loaded
        pending.log = loaded
        pending.done.set()
        if stored is not None:
            self.load_progress.log_loaded()
        return loaded

    def _open_log(self, key: TopicPartition, directory: Path, stored: StoredLog | None) -> Log:
        common = {
            "files": self.files,
            "request_flush": self._request_flush,
            "producer_id_expiration_ms": self.producer_id_expiration_ms,
        }
        config = self.config_for(key[0])
        if stored is None:
            return Log(directory, config, self._clock, new=True, **common)  # type: ignore[arg-type]
        return Log(
            directory,
            config,
            self._clock,
            stored.recovery_point,
            stored.log_start_offset,
            clean_shutdown=stored.clean_shutdown,
            on_segment_recovered=self.load_progress.segment_recovered,
            **common,  # type: ignore[arg-type]
        )

    def load_logs(
        self,
        partitions: Iterable[TopicPartition],
        threads: int = 1,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[Log]:
        """Load (or create) `partitions` with `threads` worker threads, yielding each log when ready.

        Stops submitting loads when `should_stop()` turns true or `shutdown` begins; the loads
        already running (at most `threads`) finish. A partition that fails to load is logged and
        skipped. Closing the generator early stops it the same way."""
        pending_keys = iter(partitions)
        running: set[Future[Log]] = set()
        try:
            while True:
                while len(running) < max(threads, 1) and not (self._closing or should_stop()):
                    key = next(pending_keys, None)
                    if key is None:
                        break
                    running.add(self._lanes.submit(Lane.LOG_LOAD, self.get_or_create_log, *key))
                if not running:
                    return
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    error = future.exception()
                    if error is not None:
                        log.error("Cannot load a log: %s", error)
                    else:
                        yield future.result()
        finally:
            for future in running:
                future.cancel()
            wait(running)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new configuration to its loaded logs and to those loaded later."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [
                found
                for (log_topic, _), found in [*self._logs.items(), *self._futures.items()]
                if log_topic == topic
            ]
        for found in logs:
            found.update_config(config)

    # -- log dirs and future logs (moves between log dirs: AlterReplicaLogDirs) -----------------

    def log_dir(self, path: str) -> Path | None:
        """The configured log dir whose absolute path is `path`, or None."""
        return next((d for d in self._dirs if path in (str(d.absolute()), str(d.resolve()))), None)

    @staticmethod
    def is_log_dir_online(directory: Path) -> bool:
        return directory.is_dir() and os.access(directory, os.W_OK | os.X_OK)

    def set_preferred_dir(self, topic: str, partition: int, directory: Path) -> None:
        """Create the partition in `directory` when it is created here (Kafka's preferred log dir);
        nothing if its log exists already."""
        key = TopicPartition(topic, partition)
        with self._lock:
            if key not in self._logs and key not in self._stored:
                self._preferred_dirs[key] = directory

    def future_log(self, topic: str, partition: int) -> Log | None:
        """The loaded future log of topic-partition, or None."""
        return self._futures.get((topic, partition))

    def future_logs(self) -> list[Log]:
        with self._lock:
            return list(self._futures.values())

    def future_log_dir(self, topic: str, partition: int) -> Path | None:
        """The log dir of the partition's future log (loaded or still on disk), or None."""
        key = TopicPartition(topic, partition)
        with self._lock:
            found = self._futures.get(key)
            stored = self._stored_futures.get(key)
        if found is not None:
            return found.dir.parent
        return stored.directory.parent if stored is not None else None

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        """The future log of topic-partition, loaded from disk (recovered) if it is there; None if
        there is none. Blocking: call it from a worker thread."""
        key = TopicPartition(topic, partition)
        with self._lock:
            found = self._futures.get(key)
            stored = self._stored_futures.get(key) if found is None else None
        if stored is None:
            return found
        loaded = self._open_log(key, stored.directory, stored)
        with self._lock:
            del self._stored_futures[key]
            self._futures[key] = loaded
        return loaded

    def create_future_log(self, topic: str, partition: int, directory: Path) -> Log:
        """An empty future log of topic-partition in the log dir `directory` (the one already there
        if it is in that dir). Blocking: call it from a worker thread."""
        key = TopicPartition(topic, partition)
        existing = self.get_future_log(topic, partition)
        if existing is not None:
            if existing.dir.parent == directory:
                return existing
            self.delete_future_log(topic, partition)
        created = Log(
            directory / future_dir_name(topic, partition),
            self.config_for(topic),
            self._clock,
            new=True,
            files=self.files,
            request_flush=self._request_flush,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )
        with self._lock:
            self._futures[key] = created
            self._dir_counts[directory] += 1
            self._preferred_dirs.pop(key, None)
        return created

    def delete_future_log(self, topic: str, partition: int) -> bool:
        """Remove the partition's future log (loaded or not); False if there was none. Worker
        threads."""
        key = TopicPartition(topic, partition)
        with self._lock:
            found = self._futures.pop(key, None)
            stored = self._stored_futures.pop(key, None) if found is None else None
            if found is None and stored is None:
                return False
            directory = found.dir if found is not None else stored.directory  # type: ignore[union-attr]
            self._dir_counts[directory.parent] -= 1
        _remove_dir_of(found, directory)
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Swap the caught-up future log in for the current one, which is returned for
        `finish_replace` to delete. Renames only (no fsync, no file read): the caller holds the
        partition still (the event loop) so that nothing is appended to either log meanwhile.

        The current log is renamed for deletion first, then the future to the current name: a
        stop between the two leaves a future log without a current one, which the next start
        promotes (`_promote_orphan_futures`), and never two current logs (Kafka renames the other
        way round and asks an operator to delete one of the two)."""
        key = TopicPartition(topic, partition)
        with self._lock:
            current, future = self._logs[key], self._futures[key]
        current.rename_dir(_doomed_name(current.dir))
        try:
            future.rename_dir(future.dir.with_name(dir_name(topic, partition)))
        except OSError:
            current.rename_dir(current.dir.with_name(dir_name(topic, partition)))
            raise
        with self._lock:
            del self._futures[key]
            self._logs[key] = future
            self._dir_counts[current.dir.parent] -= 1
        self.cleaner.forget(topic, partition)
        return current

    @staticmethod
    def finish_replace(old: Log, new: Log) -> None:
        """After `replace_current_with_future`: make the new log and the renames durable, then delete
        the old log. Worker threads."""
        new.flush()
        fsync_dir(new.dir.parent)
        fsync_dir(old.dir.parent)
        old.delete()

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove the log and its files (loaded or not), its future log first; False if there was
        none."""
        key = TopicPartition(topic, partition)
        self.delete_future_log(topic, partition)
        with self._lock:
            pending = self._loading.get(key)
        if pending is not None:
            pending.done.wait()
        with self._lock:
            found = self._logs.pop(key, None)
            stored = self._stored.pop(key, None) if found is None else None
            if found is not None or stored is not None:
                directory = found.dir if found is not None else stored.directory  # type: ignore[union-attr]
                self._dir_counts[directory.parent] -= 1
        if found is None and stored is None:
            return False
        self.cleaner.forget(topic, partition)
        if found is None:
            self.load_progress.log_left_out([key])
        _remove_dir_of(found, directory)
        return True

    # -- periodic work (worker threads) --------------------------------------------------------

    def _request_flush(self, target: Log) -> None:
        """A log reached flush.messages / flush.ms on append: flush it in the log-io lane."""
        with self._lock:
            if self._closing:
                return  # shutting down: the log is flushed by close
            try:
                flush = self._lanes.submit(Lane.LOG_IO, _flush_quietly, target)
            except RuntimeError:
                return  # the lanes stopped: the log is flushed by close
            self._flushes.add(flush)
        flush.add_done_callback(self._flushed)

    def _flushed(self, flush: Future[None]) -> None:
        with self._lock:
            self._flushes.discard(flush)

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every loaded log and expire idle producers; return the number of
        segments deleted. Leftover `-delete` directories found at start are removed here."""
        while self._leftovers:
            shutil.rmtree(self._leftovers.pop(), ignore_errors=True)
        deleted = 0
        for found in self.all_logs():
            deleted += found.delete_retention_segments(now_ms)
            found.remove_expired_producers(now_ms)
        self.files.reaper.reap(now_ms)
        return deleted

    def flush_dirty(self, now_ms: int) -> None:
        """Flush loaded logs whose flush.messages / flush.ms is due, and every segment rolled since
        the last flush."""
        for found in self.all_logs() + self.future_logs():
            if found.flush_due(now_ms):
                found.flush()
            elif found.recovery_point < found.active_segment.base_offset:
                found.flush(found.active_segment.base_offset)
        self.files.reaper.reap(now_ms)

    def run_cleaner(self, now_ms: int) -> int:
        """Compact the compacted logs that need it; return how many were cleaned."""
        cleaned = self.cleaner.clean_logs(now_ms)
        self.files.reaper.reap(now_ms)
        return cleaned

    def checkpoint(self) -> None:
        """Write the leader-epoch checkpoints that changed, and every log dir's recovery point and
        log start offset checkpoints (the entries of partitions not loaded are kept as read at
        start); an unchanged file is not rewritten."""
        with self._lock:
            stored = [*self._stored.items(), *self._stored_futures.items()]
            loaded = [*self._logs.items(), *self._futures.items()]
        for _, found in loaded:
            found.leader_epoch_cache.flush()
        for directory in self._dirs:
            recovery_points: dict[TopicPartition, int] = {}
            log_start_offsets: dict[TopicPartition, int] = {}
            for key, entry in stored:
                if entry.directory.parent == directory:
                    recovery_points[key] = entry.recovery_point
                    log_start_offsets[key] = entry.log_start_offset
            for key, found in loaded:
                if found.dir.parent == directory:
                    recovery_points[key] = found.recovery_point
                    log_start_offsets[key] = found.log_start_offset
            self._write_if_changed(directory / RECOVERY_POINT_CHECKPOINT, recovery_points)
            self._write_if_changed(directory / LOG_START_OFFSET_CHECKPOINT, log_start_offsets)

    def _write_if_changed(self, path: Path, offsets: dict[TopicPartition, int]) -> None:
        fingerprint = repr(sorted(offsets.items())).encode()
        if self._written_checkpoints.get(path) != fingerprint:
            write_checkpoint(path, offsets)
            self._written_checkpoints[path] = fingerprint

    def _checkpoint_quietly(self) -> set[Path]:
        """`checkpoint`, logging a failure (ENOSPC...) instead of raising: the previous files stay.
        Returns the log dirs whose checkpoints may be stale (all of them after a failure)."""
        try:
            self.checkpoint()
        except (KafkaStorageError, OSError) as exc:
            log.warning("Writing the log dir checkpoints failed, the previous ones stay: %s", exc)
            return set(self._dirs)
        return set()

    def _close_logs(self, logs: list[Log]) -> set[Path]:
        """Close `logs` in parallel; the log dirs in which a close failed."""
        if not logs:
            return set()
        closed = self._lanes.executor(Lane.LOG_LOAD).map(_close_quietly, logs)
        return {directory for directory in closed if directory is not None}

    def shutdown(self) -> None:
        """Close every loaded log (in parallel), checkpoint, mark clean dirs, release the dir locks.

        Safe while loads are in flight: new ones are refused and those running are waited for."""
        with self._lock:
            self._closing = True
            in_flight = list(self._loading.values())
            flushes = list(self._flushes)
        for pending in in_flight:
            pending.done.wait()
        self.cleaner.shutdown()
        wait(flushes)
        failed = self._close_logs(self.all_logs() + self.future_logs())
        failed |= self._checkpoint_quietly()
        with self._lock:
            unrecovered = {
                entry.directory.parent
                for entry in [*self._stored.values(), *self._stored_futures.values()]
                if not entry.clean_shutdown
            }
            self._logs.clear()
            self._futures.clear()
        for directory in self._dirs:
            if directory in unrecovered:
                log.info("%s: not marked clean, some of its partitions were never loaded", directory)
            elif directory in failed:
                log.warning(
                    "%s: not marked clean, a write failed while closing; the next start recovers it",
                    directory,
                )
            else:
                write_atomically(directory / CLEAN_SHUTDOWN_FILE, b"")
        self.files.close_all()
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds.clear()
        if self._own_lanes:
            self._lanes.shutdown()


def _close_quietly(target: Log) -> Path | None:
    """Close `target`; on a failed write (ENOSPC...) log it and return its log dir."""
    try:
        target.close()
    except (KafkaStorageError, OSError) as exc:
        log.warning("Closing %s failed: %s", target.dir.name, exc)
        return target.dir.parent
    return None


def _flush_quietly(target: Log) -> None:
    try:
        target.flush()
    except Exception:
        log.exception("Flushing %s failed", target.dir.name)


def _remove_dir_of(found: Log | None, directory: Path) -> None:
    """Rename a partition directory for deletion, then delete it: through its log when loaded (open
    fds close after file.delete.delay.ms), else its files at once."""
    if found is not None:
        found.rename_dir(_doomed_name(found.dir))
        found.delete()
    else:
        doomed = _doomed_name(directory)
        os.rename(directory, doomed)
        shutil.rmtree(doomed)


def _doomed_name(directory: Path) -> Path:
    return directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")


def _lock_dir(directory: Path) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise KafkaStorageError(f"log dir {directory} is in use by another process") from None
    return fd
