"""`ByJob`: the per-job index stays what a walk over every key would find, through every way
the node agent and the binder change their mappings."""

from __future__ import annotations

import copy
import pickle
import random

from services.core.taskindex import ByJob


def _walk(d: dict[tuple[str, str, str], int], ns: str, job: str) -> list[tuple[str, str, str]]:
    return sorted(k for k in d if k[:2] == (ns, job))


def test_the_index_matches_a_walk_after_any_sequence_of_changes() -> None:
    rng = random.Random(29)
    indexed: ByJob[tuple[str, str, str], int] = ByJob()
    plain: dict[tuple[str, str, str], int] = {}
    jobs = [("a", "j1"), ("a", "j2"), ("b", "j1")]
    for step in range(3000):
        ns, job = rng.choice(jobs)
        key = (ns, job, f"p{rng.randrange(6)}")
        op = rng.randrange(5)
        if op < 2:
            indexed[key] = plain[key] = step
        elif op == 2:
            assert indexed.pop(key, None) == plain.pop(key, None)
        elif op == 3 and key in plain:
            del indexed[key]
            del plain[key]
        elif op == 4 and rng.random() < 0.2:
            assert indexed.forget_job(ns, job) == _walk(plain, ns, job)
            for k in _walk(plain, ns, job):
                del plain[k]
        assert dict(indexed) == plain
        for n, j in jobs:
            assert indexed.of_job(n, j) == _walk(plain, n, j)
    indexed.clear()
    assert indexed.of_job("a", "j1") == [] and not indexed


def test_a_one_part_job_and_a_copy_from_a_mapping() -> None:
    """The queue's (job, pod) keys: the job is the first part; a decoded snapshot's plain dict
    becomes an indexed one."""
    copied = ByJob(1, {("ns/a", "p0"): 3, ("ns/a", "p1"): 4, ("ns/b", "p0"): 5})
    assert copied.of_job("ns/a") == [("ns/a", "p0"), ("ns/a", "p1")]
    assert copied.forget_job("ns/a") == [("ns/a", "p0"), ("ns/a", "p1")]
    assert copied == {("ns/b", "p0"): 5} and copied.of_job("ns/a") == []


def test_copies_keep_the_index() -> None:
    original = ByJob(1, {("ns/a", "p0"): 3, ("ns/b", "p0"): 5})
    for twin in (copy.copy(original), copy.deepcopy(original), pickle.loads(pickle.dumps(original))):
        assert twin == original and twin.width == 1 and twin.of_job("ns/b") == [("ns/b", "p0")]
        twin[("ns/b", "p1")] = 6
        assert original.of_job("ns/b") == [("ns/b", "p0")]  # the copy's index is its own
