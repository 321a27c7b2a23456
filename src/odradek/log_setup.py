"""Process-wide logging for the odradek command line: Kafka's log line layout on stderr.

`[2024-05-01 12:00:00,123] INFO message (logger.name)`. Called once by the CLI before anything logs.
"""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
