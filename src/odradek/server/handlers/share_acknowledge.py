"""ShareAcknowledge handler (KIP-932).

API: v1-v2 (Kafka 4's share consumers).

Behaviour: acknowledgements of records a member acquired through ShareFetch, on its share session
(server/share_session.py): epoch 0 is INVALID_SHARE_SESSION_EPOCH, another epoch must be the
session's (INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND) and moves it on, -1
closes the session once the acknowledgements are done (the member's other acquired records are
released). Each batch (first offset, last offset, acknowledge types: one for the whole range or one
per offset; ACCEPT 1, RELEASE 2, REJECT 3, RENEW 4 in v2, 0 for a gap) is applied by
server/share_partitions.py and written to the share coordinator with acks=-1 before the answer.
acquisition_lock_timeout_ms (v2) is group.share.record.lock.duration.ms.

Errors per partition: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, NOT_LEADER_OR_FOLLOWER,
INVALID_RECORD_STATE (records not in flight or not held by this member; nothing of the partition's
batches is applied), INVALID_REQUEST (a malformed batch; RENEW before v2), the share coordinator's
write errors.

Authorization (Kafka's): READ on the GROUP (GROUP_AUTHORIZATION_FAILED, top level) and READ on
each TOPIC.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.server.authz import authorized_names, require_group
from odradek.server.context import RequestContext
from odradek.server.share_session import FINAL_EPOCH, INITIAL_EPOCH

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
MIN_VERSION = 1
MAX_VERSION = 2

Response = ShareAcknowledgeResponse
RENEW, RENEW_VERSION = 4, 2  # the RENEW acknowledge type (KIP-1222) and the version that has it


async def handle(ctx: RequestContext, request: ShareAcknowledgeRequest) -> Response:
    require_group(ctx, AclOperation.READ, request.group_id or "")
    manager = ctx.broker.share_partitions
    group_id, member_id, epoch = request.group_id or "", request.member_id or "", request.share_session_epoch
    lock_ms = manager.settings.lock_duration_ms
    if not group_id or not member_id:
        return Response(error_code=ErrorCode.INVALID_REQUEST)
    if epoch == INITIAL_EPOCH:
        return Response(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    error, session = manager.sessions.check((group_id, member_id), epoch)
    if session is None:
        return Response(error_code=error)
    if epoch != FINAL_EPOCH:
        manager.sessions.update(session, (), ())
    ids = {t.topic_id for t in request.topics}
    found = {tid: ctx.broker.replica_manager.topic_name(tid) for tid in ids}
    allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, [n for n in found.values() if n])
    responses = []
    for topic in request.topics:
        name = found[topic.topic_id]
        answered = []
        for p in topic.partitions:
            code: int
            if name is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif name not in allowed:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif ctx.api_version < RENEW_VERSION and any(
                RENEW in b.acknowledge_types for b in p.acknowledgement_batches
            ):
                code = ErrorCode.INVALID_REQUEST
            else:
                batches = [
                    (b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches
                ]
                code = await manager.acknowledge(
                    group_id, member_id, name, topic.topic_id, p.partition_index, batches
                )
            answered.append(Response.PartitionData(p.partition_index, code))
        responses.append(Response.ShareAcknowledgeTopicResponse(topic.topic_id, answered))
    if epoch == FINAL_EPOCH:
        await manager.close_session(group_id, member_id)
    return Response(acquisition_lock_timeout_ms=lock_ms, responses=responses)


def error_response(request: ShareAcknowledgeRequest, version: int, code: int) -> Response:
    return Response(error_code=code)
