"""RepeatedFailures: one log line for a failure that repeats, not one per attempt (a full disk fails
every write the same way, many times a second).

Owns, for one caller, the keys failing now and the message each was logged with. `failed(key, ...)`
logs a WARNING when `key` starts failing or fails with another message, and nothing while the same
failure repeats; `succeeded(key, ...)` logs an INFO once when a failing key works again and nothing
otherwise; `forget(key)` ends a failure without a line. Its truth value says whether anything is
failing, so a hot path can skip `succeeded`.

Callers: the replica manager (appends per partition, the high watermark checkpoint), the replica
fetcher (per partition), the broker's periodic tasks (per task), the coordinators' internal topics
(their creation).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable


class RepeatedFailures:
    """See the module docstring."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._failing: dict[Hashable, str] = {}

    def __bool__(self) -> bool:
        return bool(self._failing)

    def failed(self, key: Hashable, message: str, *args: object) -> None:
        text = message % args
        if self._failing.get(key) != text:
            self._log.warning("%s", text)
        self._failing[key] = text

    def succeeded(self, key: Hashable, message: str, *args: object) -> None:
        if self.forget(key):
            self._log.info(message, *args)

    def forget(self, key: Hashable) -> bool:
        """End `key`'s failure, logging nothing; whether it was failing."""
        return self._failing.pop(key, None) is not None
