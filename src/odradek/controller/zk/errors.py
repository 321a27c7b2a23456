"""The errors of the ZooKeeper mode that callers outside the ZooKeeper client handle.

Owns exceptions only, with no import of kazoo, so that the controller and the broker can catch them
in single-node mode without loading the ZooKeeper client. `client.py` raises them (and re-exports
them under its own name).
"""

from __future__ import annotations


class BrokerIdInUseError(Exception):
    """Another live broker is registered with this broker id."""


class ControllerMovedError(Exception):
    """This broker is not (or no longer) the controller: the epoch check of a controller write failed."""
