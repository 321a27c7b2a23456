"""The quota hook of the request path (Kafka's ClientQuotaManager, as the request path sees it).

Owns `QuotaManager`: `record(ctx, cost) -> throttle_ms`, told each request's cost (today the size
of its frame in bytes) with its context (client id, principal, listener), answering how long the
connection must wait before its next request is read; and `NoQuotas`, the default, which records
nothing and never throttles (0 ms).

The request path (server/dispatcher.py) asks it once per request, after authorization; a positive
throttle time mutes the connection until then (`ClientInfo.throttle`: the network layer reads and
handles no further request of that connection before the deadline, as Kafka mutes a throttled
channel, KIP-219). Nothing sets quotas yet: the quotas issue fills this in (quota configs, the
throttle_time_ms of each response).

Callers: the dispatcher.
"""

from __future__ import annotations

from typing import Protocol

from odradek.security.authorizer import AuthorizableRequestContext


class QuotaManager(Protocol):
    def record(self, ctx: AuthorizableRequestContext, cost: int) -> int:
        """Record a request's `cost`; the milliseconds its connection must wait (0: none)."""
        ...


class NoQuotas:
    """The default: no quota, no throttling."""

    def record(self, ctx: AuthorizableRequestContext, cost: int) -> int:
        return 0
