"""The broker's logs across its log dirs: loading, creation, deletion, retention, flush, checkpoints.

Owns each `log.dirs` entry's root: the `.lock` file (an exclusive `fcntl.flock`, so two brokers never
share a dir), `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`, the clean
shutdown marker `.kafka_cleanshutdown`, and the partition directories under it. `meta.properties`
belongs to the server.

Behaviour:
- Start: every `<topic>-<partition>` directory is loaded as a `Log` with its checkpointed recovery
  point and log start offset. With the clean shutdown marker present the rescan is skipped (indexes
  are still sanity-checked); the marker is then removed and fresh checkpoints written. Leftover
  `*-delete` directories are removed; other names (`-future`, `-stray`...) are left alone.
- New logs go to the log dir holding the fewest logs.
- `delete_log` renames the directory to `<topic>-<partition>.<uuid>-delete`, then removes its files;
  open fds close after file.delete.delay.ms (see `FdReaper`).
- `run_retention` / `flush_dirty` are driven by the server's scheduler with the injected clock;
  `run_retention` also forgets idempotent producers idle for producer.id.expiration.ms (Kafka checks
  every producer.id.expiration.check.interval.ms; here it is the retention check interval);
  `flush_dirty` also flushes segments that were rolled since the last flush (as Kafka does on roll),
  which keeps recovery short without fsyncing on the append path.
- `run_cleaner` compacts the logs whose cleanup.policy contains `compact` (see `cleaner`); the broker
  calls it every log.cleaner.backoff.ms in a worker thread, like retention, with the injected clock.
  `cleaner-offset-checkpoint` in each log dir is the cleaner's.
- `shutdown` stops the cleaner (a pass in progress is abandoned), flushes and closes every log,
  writes the checkpoints, then the clean shutdown marker.

Thread safety: the log map is guarded by a lock; each `Log` guards itself.

Callers: the broker (creation from metadata, scheduler ticks, shutdown), replication (get_log).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from odradek.clock import Clock
from odradek.durable_file import write_atomically
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
from odradek.storage.log import Log, dir_name, parse_dir_name
from odradek.storage.producer_state import PRODUCER_ID_EXPIRATION_MS
from odradek.storage.reaper import FdReaper

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


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
    ) -> None:
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._clock = clock
        self._topic_configs = dict(topic_configs or {})
        self._dirs = [Path(directory) for directory in log_dirs]
        if not self._dirs:
            raise ValueError("at least one log dir is needed")
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._reaper = FdReaper()
        self._lock_fds: list[int] = []
        for directory in self._dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_fds.append(_lock_dir(directory))
        for directory in self._dirs:
            self._load_dir(directory)
        self.checkpoint()
        self.cleaner = LogCleaner(self._dirs, self.all_logs, cleaner_config or CleanerConfig())

    # -- loading -------------------------------------------------------------------------------

    def _load_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_checkpoint(directory / RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = read_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT)
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child)
                continue
            try:
                key = parse_dir_name(child.name)
            except ValueError:
                continue
            if key in self._logs:
                raise KafkaStorageError(
                    f"{key[0]}-{key[1]} exists in two log dirs: {child}, {self._logs[key].dir}"
                )
            self._logs[key] = Log(
                child,
                self.config_for(key[0]),
                self._clock,
                recovery_points.get(key, 0),
                log_start_offsets.get(key, 0),
                clean_shutdown=clean,
                reaper=self._reaper,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
        marker.unlink(missing_ok=True)

    # -- logs ----------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of topic-partition, created in the emptiest log dir if it does not exist."""
        if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise ValueError(f"illegal topic name {topic!r}")
        if partition < 0:
            raise ValueError(f"illegal partition {partition}")
        with self._lock:
            log = self._logs.get((topic, partition))
            if log is not None:
                return log
            if config is not None:
                self._topic_configs[topic] = config
            counts = {directory: 0 for directory in self._dirs}
            for existing in self._logs.values():
                counts[existing.dir.parent] = counts.get(existing.dir.parent, 0) + 1
            directory = min(self._dirs, key=lambda candidate: counts[candidate])
            log = Log(
                directory / dir_name(topic, partition),
                self.config_for(topic),
                self._clock,
                reaper=self._reaper,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
            self._logs[(topic, partition)] = log
            return log

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new configuration to its existing and future logs."""
        with self._lock:
            self._topic_configs[topic] = config
            for (log_topic, _), log in self._logs.items():
                if log_topic == topic:
                    log.update_config(config)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove the log and its files; False if there was none."""
        with self._lock:
            log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        self.cleaner.forget(topic, partition)
        log.rename_dir(log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"))
        log.delete()
        return True

    # -- periodic work -------------------------------------------------------------------------

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log and expire idle producers; return the number of segments deleted."""
        deleted = 0
        for log in self.all_logs():
            deleted += log.delete_retention_segments(now_ms)
            log.remove_expired_producers(now_ms)
        self._reaper.reap(now_ms)
        return deleted

    def flush_dirty(self, now_ms: int) -> None:
        """Flush logs whose flush.ms has elapsed, and every segment rolled since the last flush."""
        for log in self.all_logs():
            if now_ms - log.last_flush_ms >= log.config.flush_ms:
                log.flush()
            elif log.recovery_point < log.active_segment.base_offset:
                log.flush(log.active_segment.base_offset)
        self._reaper.reap(now_ms)

    def run_cleaner(self, now_ms: int) -> int:
        """Compact the compacted logs that need it; return how many were cleaned."""
        cleaned = self.cleaner.clean_logs(now_ms)
        self._reaper.reap(now_ms)
        return cleaned

    def checkpoint(self) -> None:
        """Write every log dir's recovery point and log start offset checkpoints."""
        with self._lock:
            for directory in self._dirs:
                logs = {key: log for key, log in self._logs.items() if log.dir.parent == directory}
                recovery_points = {key: log.recovery_point for key, log in logs.items()}
                log_start_offsets = {key: log.log_start_offset for key, log in logs.items()}
                write_checkpoint(directory / RECOVERY_POINT_CHECKPOINT, recovery_points)
                write_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT, log_start_offsets)

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, mark the shutdown clean, release the dir locks."""
        self.cleaner.shutdown()
        with self._lock:
            for log in self._logs.values():
                log.close()
            self.checkpoint()
            for directory in self._dirs:
                _write_marker(directory / CLEAN_SHUTDOWN_FILE)
            self._logs.clear()
            self._reaper.close_all()
            for fd in self._lock_fds:
                os.close(fd)
            self._lock_fds.clear()


def _lock_dir(directory: Path) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise KafkaStorageError(f"log dir {directory} is in use by another process") from None
    return fd


def _write_marker(path: Path) -> None:
    write_atomically(path, b"")
