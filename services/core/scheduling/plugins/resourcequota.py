"""`resourcequota` (Volcano `plugins/resourcequota`): a PodGroup is held at enqueue (stays
Pending) when its minResources would take its namespace past a ResourceQuota's `hard`.

Volcano's rule: for each quota of the job's namespace, the job's minResources on the quota's
hard names, added to what the namespace uses and to what this session already admitted there
(JobEnqueued), must be ≤ hard on every name the job asks; a job without minResources is never
held (the enqueue action admits it before any vote); scoped quotas (`spec.scopes`,
`scopeSelector`) are not applied. The plugin permits every job it does not hold.

Tessera's departures, for cards: a namespace's use is what Tessera's own jobs hold plus the
API server's status.used beyond Tessera's pods (quota.py says why both, without counting a pod
twice), and card memory counts what slices hold. A namespace without quotas costs one lookup
per pending job; a cluster without any, nothing at session open.
"""

from __future__ import annotations

from contracts.events import QuotaChanged
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import JobInfo
from services.core.scheduling.quota import (
    Accounting,
    Vec,
    accounting_of,
    add_into,
    amount,
    base_name,
)
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT, REJECT


class ResourceQuotaPlugin:
    name = "resourcequota"

    def __init__(self, conf: PluginConf) -> None:
        self.conf = conf
        self.quotas: dict[str, tuple[QuotaChanged, ...]] = {}  # namespace → its applied quotas
        self.used: dict[str, Vec] = {}  # namespace → Tessera's holdings there
        self.in_api: dict[str, Vec] = {}  # namespace → requests of Tessera's pods the API has
        self.pending: dict[str, Vec] = {}  # namespace → admitted by this session (JobEnqueued)
        self.acc: Accounting | None = None

    def on_session_open(self, ssn: Session) -> None:
        quotas = ssn.snapshot.quotas
        if not quotas:
            return
        self.quotas = {ns: applied for ns, qs in quotas.by_namespace.items()
                       if (applied := tuple(q for q in qs if not q.scoped and q.hard))}  # fmt: skip
        if not self.quotas:
            return
        self.acc = acc = accounting_of(ssn.node_list)
        reported = {ns for ns, qs in self.quotas.items() if any(q.used for q in qs)}
        for job in ssn.jobs.values():
            ns = job.spec.namespace
            if ns not in self.quotas:
                continue
            add_into(self.used.setdefault(ns, {}), acc.job_held(job))
            if ns in reported:
                add_into(self.in_api.setdefault(ns, {}), acc.job_in_api(job))

    # --- the rule --------------------------------------------------------------------------

    def _over(self, job: JobInfo) -> tuple[QuotaChanged, str, float, float, float] | None:
        """The first quota name the job would take past hard: (quota, key, asked, hard, used)."""
        ns = job.spec.namespace
        quotas = self.quotas.get(ns)
        if not quotas or self.acc is None:
            return None
        ask = self.acc.job_ask(job)
        if ask is None:
            return None
        held, pending, in_api = (
            self.used.get(ns, {}),
            self.pending.get(ns, {}),
            self.in_api.get(ns, {}),
        )
        for q in quotas:
            for key in sorted(q.hard):
                name = base_name(key)
                want = ask.get(name, 0)
                if want <= 0:
                    continue  # Volcano masks the request to the names the job asks
                used = others_use(q, key, in_api) + held.get(name, 0) + pending.get(name, 0)
                if used + want > q.hard[key]:
                    return q, key, want, q.hard[key], used
        return None

    def job_enqueueable(self, job: JobInfo) -> int:
        if job.spec.namespace not in self.quotas:
            return PERMIT  # Volcano: no quota in the namespace, nothing to hold the job
        return REJECT if self._over(job) is not None else PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        ns = job.spec.namespace
        if ns in self.quotas and self.acc is not None:
            add_into(self.pending.setdefault(ns, {}), self.acc.job_ask(job) or {})

    def enqueue_reason(self, job: JobInfo) -> tuple[str, str] | None:
        """The refusal in words: the namespace, the name, asked/quota/used, and the quota."""
        over = self._over(job)
        if over is None:
            return None
        q, key, want, hard, used = over
        name = base_name(key)
        a = amount
        words = (f"namespace {q.namespace}: {name} requested {a(name, want)}, quota {a(name, hard)}, "
                 f"used {a(name, used)} (ResourceQuota {q.name}: {key})")  # fmt: skip
        if want > hard:
            fix = (f"ask for at most {a(name, hard)} {name}, or raise {key} of ResourceQuota "
                   f"{q.namespace}/{q.name} to {a(name, want)}")  # fmt: skip
        else:
            fix = (f"let jobs in namespace {q.namespace} finish ({a(name, used + want - hard)} {name} "
                   f"must be freed), or raise {key} of ResourceQuota {q.namespace}/{q.name} to "
                   f"{a(name, used + want)}")  # fmt: skip
        return words, fix

    # --- what `tessera get quota` shows -----------------------------------------------------

    def records(self) -> list[dict[str, object]]:
        """Per quota, by hard name: hard, used in all, held by Tessera's jobs, used by others
        (status.used beyond Tessera's pods)."""
        out: list[dict[str, object]] = []
        for ns, quotas in sorted(self.quotas.items()):
            held, in_api = self.used.get(ns, {}), self.in_api.get(ns, {})
            for q in quotas:
                rec: dict[str, object] = {"namespace": ns, "name": q.name}
                for col in ("hard", "used", "tessera", "others"):
                    rec[col] = {}
                for key in sorted(q.hard):
                    name = base_name(key)
                    others, mine = others_use(q, key, in_api), held.get(name, 0)
                    for col, v in (("hard", q.hard[key]), ("used", mine + others), ("tessera", mine),
                                   ("others", others)):  # fmt: skip
                        rec[col][key] = amount(name, v)  # type: ignore[index]
                out.append(rec)
        return out


def others_use(q: QuotaChanged, key: str, in_api: Vec) -> int:
    """What the API server's status.used counts beyond Tessera's own pods (0 with no status)."""
    if key not in q.used:
        return 0
    return max(0, q.used[key] - in_api.get(base_name(key), 0))
