"""Whether a ZooKeeper-mode broker has heard from the current controller since it registered: the
signal of a cluster stuck with a live broker the controller does not reach.

Owns `ControllerContact`. A registered broker is owed, by every controller elected while it is
registered, a LeaderAndIsr and an UpdateMetadata (Kafka's onBrokerStartup, and a new controller's
requests to every live broker). `check()`, a periodic job of the broker's scheduler, reads the
controller's id and epoch from ZooKeeper and compares them with what the control plane accepted
(server/control_plane.py: the newest controller epoch of an accepted request, and the broker epoch
this broker had when it accepted one). When this broker has been registered, and that controller
epoch known to it, for longer than the bound (`controller.socket.timeout.ms`, the controller's own
timeout of a request to a broker), and it has accepted no request from that epoch or a newer one
under its current registration, it logs one WARNING naming the controller and epoch and `silent`
turns true (/metrics: `odradek_broker_controller_silent`); a request accepted later clears it, with
an INFO line. A failed ZooKeeper read skips that check.

Deliberate addition: Kafka has no such signal (its operators find out from under-replicated
partitions).

Callers: the broker (server/kafka_server.py) builds one in ZooKeeper mode and schedules `check`;
the metrics (server/metrics.py) read `silent`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from odradek.replication.fencing import NO_EPOCH

log = logging.getLogger(__name__)

# The controller's broker id and epoch as ZooKeeper has them (None for either when missing).
ControllerLookup = Callable[[], Awaitable[tuple[int | None, int | None]]]


class ControllerContact:
    """See the module docstring."""

    def __init__(
        self,
        broker_id: int,
        lookup: ControllerLookup,
        heard: Callable[[], tuple[int, int]],
        broker_epoch: Callable[[], int],
        bound_ms: Callable[[], int],
        monotonic_ms: Callable[[], int],
    ) -> None:
        self._broker_id = broker_id
        self._lookup = lookup
        self._heard = heard  # (newest accepted controller epoch, broker epoch when accepted)
        self._broker_epoch = broker_epoch
        self._bound_ms = bound_ms
        self._now_ms = monotonic_ms
        self._since: dict[tuple[int, int], int] = {}  # (broker epoch, controller epoch) -> first seen
        self.silent = False

    async def check(self) -> None:
        broker_epoch = self._broker_epoch()
        if broker_epoch == NO_EPOCH:
            return  # not registered
        try:
            controller, epoch = await self._lookup()
        except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable: the next check reads again
            log.debug("Broker %d could not read the controller from ZooKeeper: %r", self._broker_id, exc)
            return
        if controller is None or epoch is None:
            return  # an election in progress
        heard_epoch, heard_as = self._heard()
        if heard_as == broker_epoch and heard_epoch >= epoch:
            self._since.clear()
            if self.silent:
                log.info(
                    "Broker %d hears from controller %d (epoch %d) again", self._broker_id, controller, epoch
                )
            self.silent = False
            return
        since = self._since.setdefault((broker_epoch, epoch), self._now_ms())
        if self.silent or self._now_ms() - since < self._bound_ms():
            return
        self.silent = True
        log.warning(
            "Broker %d has had no LeaderAndIsr or UpdateMetadata from controller %d (controller epoch %d) "
            "in %d ms since it registered (broker epoch %d) or that controller was elected: the controller "
            "does not reach this broker, which hosts no replica it was not told of",
            self._broker_id,
            controller,
            epoch,
            self._now_ms() - since,
            broker_epoch,
        )
