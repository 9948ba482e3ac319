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
    USERS,
    matches,
    may_append,
    permissions,
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
