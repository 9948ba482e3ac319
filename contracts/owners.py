"""Slice owner keys: `<namespace>/<job>/<task>`, unambiguous whatever the names contain.

A ledger slice names the task that holds it, and a deleted job releases every owner under
`<namespace>/<job>/`. With raw names, pod `b` of job `a/x` and pod `x/b` of job `a` were the same
key, and deleting job `a` freed the slices of job `a/x` (issue 12 item 2). Each component is
escaped (`%` → `%25`, `/` → `%2F`) so `/` only ever separates components; names without `%` or
`/` — every name the API server accepts — keep exactly the keys older logs hold.
"""

from __future__ import annotations

import re

_ESCAPED = re.compile(r"%(25|2F)")
_PLAIN = {"25": "%", "2F": "/"}


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def _unescape(part: str) -> str:
    return _ESCAPED.sub(lambda m: _PLAIN[m.group(1)], part)  # one pass: "%252F" is "%2F"


def owner_key(namespace: str, job: str, task: str) -> str:
    """The owner of a task's slices on the card ledgers."""
    return f"{_escape(namespace)}/{_escape(job)}/{_escape(task)}"


def job_prefix(namespace: str, job: str) -> str:
    """What every owner key of the job — and of no other job — starts with."""
    return f"{_escape(namespace)}/{_escape(job)}/"


def parse_owner(owner: str) -> tuple[str, str, str]:
    """(namespace, job, task) of an owner key; raises ValueError for anything else."""
    parts = owner.split("/")
    if len(parts) != 3:
        raise ValueError(f"{owner!r} is not a <namespace>/<job>/<task> owner key")
    ns, job, task = (_unescape(p) for p in parts)
    return ns, job, task
