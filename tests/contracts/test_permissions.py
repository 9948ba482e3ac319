"""The permission table itself (`contracts.permissions`): wildcard matching as nats-server does
it, and rights that follow from `APPENDS` — the card ledgers the allocator's alone, only the
operator deletes, and only it and the queue service's retention purge."""

from __future__ import annotations

import pytest

from contracts.permissions import (
    ADMIN,
    APPENDS,
    CLI,
    COMPACTORS,
    SNAPSHOTTERS,
    USERS,
    durable_of,
    inbox_prefix,
    matches,
    may_append,
    nats_user,
    permissions,
    role_of,
    snapshot_bucket,
)
from contracts.subjects import Subjects

S = Subjects()


@pytest.mark.parametrize(("pattern", "subject", "want"), [
    ("a.>", "a.b", True), ("a.>", "a.b.c", True), ("a.>", "a", False),
    ("a.*", "a.b", True), ("a.*", "a.b.c", False), ("a.b", "a.b", True), ("a.b", "a.c", False),
    ("$JS.API.CONSUMER.INFO.TESSERA.*", "$JS.API.CONSUMER.INFO.TESSERA.allocator", True),
])  # fmt: skip
def test_matches_like_nats(pattern: str, subject: str, want: bool) -> None:
    assert matches(pattern, subject) is want


def test_only_the_allocator_appends_to_the_ledgers_and_nobody_purges() -> None:
    card = S.card("node-a", "uuid-0")
    assert [u for u in APPENDS if may_append(u, card, S)] == ["allocator"]
    assert not may_append(CLI, S.job("default", "j"), S)
    for user in USERS:
        rights = permissions(user, S)
        for api in ("$JS.API.STREAM.DELETE.TESSERA", "$JS.API.STREAM.MSG.DELETE.TESSERA",
                    "$JS.API.CONSUMER.DELETE.TESSERA.queue"):
            assert rights.may_publish(api) is (user == ADMIN), (user, api)
        purges = rights.may_publish("$JS.API.STREAM.PURGE.TESSERA")
        assert purges is (user in (ADMIN, *COMPACTORS)), user  # retention: the queue service
    assert not permissions(CLI, S).may_publish(S.events.replace(">", "job.a.b"))


def test_an_unknown_user_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="user 'nodeagnet': not a service"):
        permissions("nodeagnet")


def test_a_service_touches_only_what_it_owns() -> None:
    """Issue 23's rules as the table states them (the real server's refusals:
    tests/runtime/test_least_privilege.py): no stream update; one durable, named by the user;
    one snapshot bucket; replies on the user's own inbox prefix."""
    for user in APPENDS:
        rights = permissions(user, S)
        for stream in ("TESSERA", "TESSERA_DLQ", f"OBJ_{snapshot_bucket('TESSERA', user)}", "KV_TESSERA_leases"):
            assert not rights.may_publish(f"$JS.API.STREAM.UPDATE.{stream}"), (user, stream)
        for other in APPENDS:
            mine = other == user
            assert rights.may_publish(f"$JS.API.CONSUMER.MSG.NEXT.TESSERA.{other}") is mine, (user, other)
            assert rights.may_publish(f"$JS.ACK.TESSERA.{other}.1.2.3.4.0") is mine, (user, other)
            bucket = snapshot_bucket("TESSERA", other)
            assert rights.may_publish(f"$O.{bucket}.M.x") is (mine and user in SNAPSHOTTERS), (user, other)
            assert rights.may_subscribe(f"{inbox_prefix(nats_user(other))}.x") is mine, (user, other)
        assert not rights.may_subscribe("_INBOX.x")
        assert role_of(nats_user(user)) == user and durable_of(user) == user
    assert not permissions(CLI, S).may_subscribe(f"{inbox_prefix(nats_user('allocator'))}.x")
    assert role_of("someone-else") == ""
