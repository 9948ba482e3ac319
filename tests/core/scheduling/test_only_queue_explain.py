"""A job waiting in an overused queue that is the only queue with jobs is told the cluster is
full for it, not to raise the queue's weight: proportion shares the cluster by weight among the
queues with jobs, and the only one deserves all it asks already (an inference operator's review:
`default`, alone under root, told "or raise its weight"). With another queue asking, a weight
does move the share, and is still advised. The words are recorded (rules generation 3,
`config.ONLY_QUEUE_WORDS`): a log of generation 2 keeps its own on `replay --verify`."""

from __future__ import annotations

import msgspec

from contracts.events import JobUnschedulable, SchedulerConfigured
from services.core.scheduling.config import ONLY_QUEUE_WORDS
from services.core.scheduling.verify import decoded, verify
from tests.core.scheduling.test_pipelined_shares import conf, job_doc, queue_doc, simulate

CONF = conf("proportion", actions="enqueue, allocate, backfill, preempt, reclaim")
OVERUSED = "queue default is overused: it holds its deserved share in every resource (proportion)"


def verdicts(docs: str, job: str) -> tuple[list[JobUnschedulable], list[object]]:
    sim = simulate(CONF, docs)
    messages = list(sim.log.messages())
    mine = [v for m in messages if m.headers.get("Tessera-Type") == "JobUnschedulable"
            and (v := msgspec.json.decode(m.data, type=JobUnschedulable)).name == job]  # fmt: skip
    assert mine
    return mine, messages


def test_the_only_queue_with_jobs_is_not_told_to_raise_its_weight() -> None:
    docs = "\n---\n".join([job_doc("train", "default", 8), job_doc("online", "default", 2, at=10)])
    mine, _ = verdicts(docs, "online")
    overused = [v for v in mine if v.why == OVERUSED]
    assert overused, [v.why for v in mine]
    for v in overused:
        assert "weight" not in v.unblock.replace("a weight shares", ""), v.unblock
        assert v.unblock.startswith("the cluster is full for queue default, the only queue with jobs"), v.unblock


def test_a_queue_beside_another_asking_is_still_told_its_weight() -> None:
    docs = "\n---\n".join([queue_doc("qb", "weight: 1"), job_doc("train", "default", 8),
                           job_doc("online", "default", 2, at=10), job_doc("other", "qb", 1, at=10)])  # fmt: skip
    mine, _ = verdicts(docs, "online")
    assert [v.unblock for v in mine if v.why == OVERUSED] \
        and all(v.unblock == "let queue default's running pods finish, or raise its weight"
                for v in mine if v.why == OVERUSED), [v.unblock for v in mine]  # fmt: skip


def test_a_log_of_generation_2_keeps_its_words() -> None:
    docs = "\n---\n".join([job_doc("train", "default", 8), job_doc("online", "default", 2, at=10)])
    _, messages = verdicts(docs, "online")
    stored, poisoned = decoded(messages)
    assert not poisoned
    older = [(s, h, msgspec.structs.replace(e, rules=ONLY_QUEUE_WORDS - 1) if isinstance(e, SchedulerConfigured)
              else e) for s, h, e in stored]  # fmt: skip
    d = verify(older).divergence
    assert d is not None and isinstance(d.rederived, JobUnschedulable), d
    assert d.rederived.unblock == "let queue default's running pods finish, or raise its weight"
    assert verify(stored).ok
