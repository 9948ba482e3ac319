"""NATS subject wildcards as the shared consumer's readers filter with them: the prefix fast
path of `matcher` answers exactly what the token-by-token rule does."""

from __future__ import annotations

import itertools

from services.runtime.eventlog.model import matcher, subject_matches

PATTERNS = ["tessera.ev.job.>", "tessera.ev.node.>", "tessera.ev.*.n1", "tessera.ev.>", "tessera.ev.job.*.p"]
SUBJECTS = ["tessera.ev.job.default.p", "tessera.ev.job", "tessera.ev.node.n1", "tessera.ev.card.n1",
            "tessera.ev.jobx.a", "tessera.ev", "tessera.dlq.queue", "other.ev.job.a.b"]  # fmt: skip


def test_the_rule_itself() -> None:
    assert subject_matches("a.>", "a.b.c") and not subject_matches("a.>", "a")
    assert subject_matches("a.*.c", "a.b.c") and not subject_matches("a.*", "a.b.c")


def test_matcher_agrees_with_the_rule_for_every_set_of_patterns() -> None:
    for n in range(len(PATTERNS) + 1):
        for chosen in itertools.combinations(PATTERNS, n):
            m = matcher(chosen)
            for s in SUBJECTS:
                assert m(s) == any(subject_matches(p, s) for p in chosen), (chosen, s)
