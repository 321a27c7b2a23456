"""The fetching side of a fetch session (KIP-227): what each request names, and how answers and
failures move the session."""

from __future__ import annotations

from odradek.client.fetch_session import FetchSessionHandler
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_session import INITIAL_EPOCH, INT32_MAX, INVALID_SESSION_ID

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def opened(session_id: int = 7) -> FetchSessionHandler:
    handler: FetchSessionHandler = FetchSessionHandler()
    plan = handler.plan({A: 10, B: 20})
    handler.on_response(plan, ErrorCode.NONE, session_id)
    return handler


def test_the_first_request_is_full_and_a_session_id_opens_the_session() -> None:
    handler: FetchSessionHandler = FetchSessionHandler()
    plan = handler.plan({A: 10, B: 20})
    assert (plan.session_id, plan.epoch, plan.full) == (INVALID_SESSION_ID, INITIAL_EPOCH, True)
    assert plan.send == {A: 10, B: 20} and plan.forget == []
    handler.on_response(plan, ErrorCode.NONE, 7)
    assert (handler.session_id, handler.epoch) == (7, 1)


def test_a_broker_without_a_free_slot_leaves_the_next_request_full() -> None:
    handler = opened(session_id=INVALID_SESSION_ID)
    plan = handler.plan({A: 10, B: 20})
    assert plan.full and plan.send == {A: 10, B: 20}


def test_an_incremental_request_names_what_changed_and_forgets_what_is_no_longer_wanted() -> None:
    handler = opened()
    unchanged = handler.plan({A: 10, B: 20})
    assert (unchanged.session_id, unchanged.epoch, unchanged.send, unchanged.forget) == (7, 1, {}, [])
    handler.on_response(unchanged, ErrorCode.NONE, 7)
    plan = handler.plan({A: 11, C: 5})
    assert (plan.epoch, plan.send, plan.forget) == (2, {A: 11, C: 5}, [B])
    handler.on_response(plan, ErrorCode.NONE, 7)
    again = handler.plan({A: 11, C: 5})  # the session now holds A at 11 and C, and not B
    assert (again.epoch, again.send, again.forget) == (3, {}, [])
    assert handler.plan({B: 20}).send == {B: 20}


def test_epochs_wrap_to_one_after_int32_max() -> None:
    handler = opened()
    handler.epoch = INT32_MAX
    handler.on_response(handler.plan({A: 10, B: 20}), ErrorCode.NONE, 7)
    assert handler.epoch == 1


def test_a_session_the_broker_does_not_know_restarts_without_an_id() -> None:
    handler = opened()
    handler.on_response(handler.plan({A: 10, B: 20}), ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    plan = handler.plan({A: 10, B: 20})
    assert (plan.session_id, plan.epoch, plan.send) == (INVALID_SESSION_ID, INITIAL_EPOCH, {A: 10, B: 20})


def test_a_wrong_epoch_or_a_failed_request_closes_the_session_with_the_next_full_request() -> None:
    for fail in ("epoch", "no answer"):
        handler = opened()
        plan = handler.plan({A: 10, B: 20})
        if fail == "epoch":
            handler.on_response(plan, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        else:
            handler.on_failure()
        again = handler.plan({A: 10, B: 20})
        assert (again.session_id, again.epoch, again.send) == (7, INITIAL_EPOCH, {A: 10, B: 20}), fail


def test_an_incremental_request_given_the_changed_keys_looks_at_those_only() -> None:
    handler = opened()
    wanted = {A: 11, B: 20}
    plan = handler.plan(wanted, changed={A})
    assert (plan.send, plan.forget) == ({A: 11}, [])
    handler.on_response(plan, ErrorCode.NONE, 7)
    stale = handler.plan({A: 11, B: 21}, changed=set())  # B's change was not reported: not sent
    assert (stale.send, stale.forget) == ({}, [])
    handler.on_response(stale, ErrorCode.NONE, 7)
    plan = handler.plan({A: 11, C: 5}, changed={B, C})  # B left the wanted partitions, C joined
    assert (plan.send, plan.forget) == ({C: 5}, [B])
    handler.on_response(plan, ErrorCode.NONE, 7)
    assert handler.plan({A: 11, C: 5}, changed={A, C}).send == {}  # unchanged since they were sent
