"""SCRAM credentials in the metadata store, as Kafka keeps them: in the configs of the user entity
(`/config/users/<sanitized user>` in ZooKeeper, the local metadata file on a single node), one key
per mechanism (`SCRAM-SHA-256`, `SCRAM-SHA-512`) holding `salt=...,stored_key=...,server_key=...,
iterations=...`. The entity's other keys (quotas) are never touched.

Callers: the broker's SCRAM exchanges (`lookup`), the DescribeUserScramCredentials and
AlterUserScramCredentials handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.controller.store import USERS, MetadataStore, desanitize, sanitize
from odradek.security.sasl.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)


def lookup(store: MetadataStore, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
    """The user's stored credential for `mechanism`, None when there is none (or it is unreadable)."""
    stored = store.client_entity_configs(USERS, sanitize(user)).get(mechanism.mechanism_name)
    if stored is None:
        return None
    try:
        return ScramCredential.from_config(stored)
    except ValueError as exc:
        log.warning("The %s credential of user %s is unreadable: %s", mechanism.mechanism_name, user, exc)
        return None


def described(store: MetadataStore, user: str) -> dict[ScramMechanism, int]:
    """The user's mechanisms with their iterations."""
    configs = store.client_entity_configs(USERS, sanitize(user))
    return _iterations(configs)


def users_with_credentials(store: MetadataStore) -> list[str]:
    """Every user with at least one SCRAM credential, sorted."""
    return sorted(
        desanitize(name)
        for (entity_type, name), configs in store.client_entities().items()
        if entity_type == USERS and "/" not in name and _iterations(configs)
    )


def _iterations(configs: Mapping[str, str]) -> dict[ScramMechanism, int]:
    result = {}
    for mechanism in ScramMechanism:
        stored = configs.get(mechanism.mechanism_name)
        if stored is not None:
            try:
                result[mechanism] = ScramCredential.from_config(stored).iterations
            except ValueError:
                continue
    return result


async def alter(
    store: MetadataStore,
    user: str,
    upserts: Mapping[ScramMechanism, ScramCredential],
    deletes: list[ScramMechanism],
) -> None:
    """Set and delete the user's credentials, keeping the entity's other keys."""
    await store.alter_client_entity_configs(
        USERS,
        sanitize(user),
        {m.mechanism_name: c.to_config() for m, c in upserts.items()},
        [m.mechanism_name for m in deletes],
    )
