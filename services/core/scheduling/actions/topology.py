"""allocate for a gang with `spec.networkTopology` (Volcano `allocateResourceForTasksWithTopology`).

Tiers are searched from the lowest up to `highestTierAllowed` (or the tier of
`highestTierName`); in each, the gang is tried inside every HyperNode's nodes alone, each try
thrown away, and the search stops at the first tier where some HyperNode holds the gang ready.
Of those the one scoring most is taken — the sum of its pods' node scores (Volcano accumulates
them the same way, so binpack's fuller nodes win) plus Tessera's HyperNode binpack: the share of
the HyperNode's cpu, memory and cards in use once the gang is in, so a gang goes where others
already run and leaves whole HyperNodes whole. Ties go to the name. The chosen try is then made
for real, in the action's statement.

Last comes Volcano's virtual cluster root (hypernodes.py `ROOT`, one tier above the highest real
one, every node): a gang allowed its tier that no real HyperNode holds is placed as any gang is,
anywhere in the cluster (alone at its tier, it needs no try to compare).

A gang with pods already placed keeps to them: a HyperNode is a candidate only if the lowest
HyperNode holding it and those pods' nodes is within the allowed tier (Volcano's
`jobAllocatedHyperNode` LCA rule; Tessera reads the pods' nodes instead of an annotation; two
HyperNodes with no common real ancestor meet at the root).

`hard` waits when no HyperNode of an allowed tier holds it, with explain's words ("no tier-1
HyperNode has 16 free Ascend910B3 cards; s1 has 12"); `soft` prefers the lowest tier holding it
and is placed as any gang when none does. A hard gang without a highest tier is placed as any
gang: only jobs that ask pay for this search.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.core.scheduling.config import TOPOLOGY_NODES_WORDS
from services.core.scheduling.hypernodes import ROOT, Topology, build
from services.core.scheduling.model import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement

PLUGIN = "network-topology-aware"
#: what a HyperNode's fullness adds to a try's score (the plugin's `weight` argument scales it)
BINPACK_SCALE = 10.0

AllocateJob = Callable[..., None]


def topology_of(ssn: Session) -> Topology:
    """The session's HyperNode tree, built on first use."""
    got = ssn.__dict__.get("_hypernode_tree")
    if got is None:
        got = build(ssn.snapshot.hypernodes, {n.name: n.labels for n in ssn.node_list})
        ssn.__dict__["_hypernode_tree"] = got
    return got


def highest_tier(job: JobInfo, topo: Topology) -> int | None:
    """The highest tier a gang may span (None: no constraint it can be held to)."""
    nt = job.spec.network_topology
    if nt is None:
        return None
    if nt.highest_tier is not None:
        return nt.highest_tier
    if nt.highest_tier_name:
        return topo.tier_names.get(nt.highest_tier_name, -1)  # unknown name: no tier allows it
    return None


def hard(job: JobInfo) -> bool:
    """A gang held to one HyperNode (preempt and reclaim leave it alone: Volcano's topology
    placement does not preempt)."""
    nt = job.spec.network_topology
    return (
        nt is not None
        and nt.mode == "hard"
        and (nt.highest_tier is not None or bool(nt.highest_tier_name))
    )


@dataclass(slots=True)
class _Try:
    tier: int
    hypernode: str
    ready: bool
    placed: int
    score: float


def _drain(tasks: PriorityQueue[TaskInfo]) -> list[TaskInfo]:
    out = []
    while not tasks.empty():
        out.append(tasks.pop())
    return out


def _fullness(ssn: Session, nodes: frozenset[str]) -> float:
    """Mean share in use of the HyperNode's cpu, memory and cards (0..1)."""
    alloc_cpu = used_cpu = alloc_mem = used_mem = cards = busy = 0
    for name in nodes:
        n = ssn.nodes.get(name)
        if n is None:
            continue
        alloc_cpu += n.allocatable.cpu
        used_cpu += n.used.cpu
        alloc_mem += n.allocatable.memory
        used_mem += n.used.memory
        for c in n.cards:
            cards += 1
            busy += c.usage.slices_used > 0
    shares = [u / a for u, a in ((used_cpu, alloc_cpu), (used_mem, alloc_mem), (busy, cards)) if a]
    return sum(shares) / len(shares) if shares else 0.0


def allocate_with_topology(
    allocate_job: AllocateJob, ssn: Session, queue: QueueInfo, job: JobInfo,
    tasks: PriorityQueue[TaskInfo], stmt: Statement,
) -> None:  # fmt: skip
    """The gang placed in one HyperNode, or (hard) left waiting with the reason."""
    nt = job.spec.network_topology
    if nt is None:
        allocate_job(ssn, queue, job, tasks, stmt)
        return
    if nt.mode == "hard" and nt.highest_tier is None and not nt.highest_tier_name:
        allocate_job(ssn, queue, job, tasks, stmt)  # Volcano: no highest tier, no constraint
        return
    topo = topology_of(ssn)  # (not before: a job that asks nothing of it never builds the tree)
    limit = highest_tier(job, topo)
    is_hard = nt.mode == "hard"
    if is_hard and topo.problem:
        job.why, job.why_plugin = f"the HyperNode tree cannot be used: {topo.problem}", PLUGIN
        job.unblock = "correct the HyperNodes' members"
        for t in _drain(tasks)[:1]:
            job.fit_errors[t.uid] = job.why
        return
    items = _drain(tasks)
    placed = [t for t in job.tasks.values() if t.status in ALLOCATED_STATUSES and t.node]
    anchor = topo.spanning(t.node for t in placed) if placed else None
    plugin = ssn.plugins.get(PLUGIN)
    weight = float(getattr(plugin, "weight", 1))
    start = ssn.__dict__.get("_next_start")
    saved = (dict(job.fit_errors), dict(job.node_errors), job.why, job.why_plugin, job.unblock)

    def attempt(nodes: frozenset[str] | None, into: Statement | None) -> PriorityQueue[TaskInfo]:
        if start is None:
            ssn.__dict__.pop("_next_start", None)
        else:
            ssn.__dict__["_next_start"] = start
        job.fit_errors, job.node_errors = dict(saved[0]), dict(saved[1])
        job.why, job.why_plugin, job.unblock = saved[2], saved[3], saved[4]
        left = PriorityQueue(ssn.task_order, items)
        allocate_job(ssn, queue, job, left, stmt if into is None else into, within=nodes)
        return left

    def anywhere() -> None:  # the root's try, or soft's fallback: placed as any gang is
        left = attempt(None, None)
        for t in _drain(left):  # what a ready gang leaves is tried again, as allocate does
            tasks.push(t)

    least = _demand(job, items)[1]
    tries: list[_Try] = []
    for tier in topo.tiers:
        if limit is not None and tier > limit:
            break
        if any(t.ready for t in tries):
            break
        if tier == topo.root_tier:  # every node: no real HyperNode of an allowed tier held it
            if placed and anchor is None:
                break  # placed pods on nodes gone from the session
            anywhere()
            return
        for name in topo.by_tier[tier]:
            if placed:
                if anchor is None:
                    continue  # placed pods outside every HyperNode: none holds the gang
                lca = topo.lca(name, anchor)
                if lca is None or (limit is not None and topo.tier[lca] > limit):
                    continue
            if _short(ssn, topo.nodes[name], least):  # too small for any try: not tried
                tries.append(_Try(tier, name, False, 0, 0.0))
                continue
            trial = Statement(ssn)
            attempt(topo.nodes[name], trial)
            mine = [op[1] for op in trial.ops if op[0] in ("allocate", "pipeline")]
            ready = bool(mine) and ssn.job_ready(job)
            score = sum(t.score for t in mine) + weight * BINPACK_SCALE * _fullness(
                ssn, topo.nodes[name]
            )
            tries.append(_Try(tier, name, ready, len(mine), score))
            trial.discard()
    good = [t for t in tries if t.ready]
    if good:
        best = min(good, key=lambda t: (t.tier, -t.score, t.hypernode))
        left = attempt(topo.nodes[best.hypernode], stmt)
        for t in _drain(left):
            tasks.push(t)
        return
    if not is_hard:  # soft: no HyperNode holds it, so it goes where it fits
        anywhere()
        return
    job.fit_errors, job.node_errors = (
        dict(saved[0]),
        {},
    )  # the nodes are not why: the HyperNodes are
    job.why, job.unblock = refusal_words(ssn, job, topo, limit, items, tries, placed)
    job.why_plugin = PLUGIN
    if items:  # (the tasks stay out of the queue: tried for this session, as a failed task is)
        job.fit_errors[items[0].uid] = job.why


def _demand(job: JobInfo, items: list[TaskInfo]) -> tuple[int, dict[str, int]]:
    """How many pods the gang still needs, and the least they can ask in all: per resource the
    sum of the smallest asks of that many pods (cpu, memory, whole cards by type), so a
    HyperNode with less free is one no try can fill (and may be skipped untried)."""
    need = min(max(job.min_available - job.ready_task_num(), 1), len(items))
    asks: dict[str, list[int]] = {}
    for t in items:
        mine = {"cpu": t.resreq.cpu, "memory": t.resreq.memory}
        for d in t.spec.devices:
            if d.exclusive and not d.allowed_types:  # a whole card: one with nothing on it
                mine[d.type] = mine.get(d.type, 0) + d.count
        for k in set(asks) | set(mine):
            asks.setdefault(k, []).append(mine.get(k, 0))
    return need, {k: sum(sorted(v)[:need]) for k, v in asks.items()}


def _short(ssn: Session, nodes: frozenset[str], total: dict[str, int]) -> bool:
    return any(v and _free(ssn, nodes, k) < v for k, v in total.items())


def _free(ssn: Session, nodes: frozenset[str], what: str) -> int:
    return _sum(ssn, nodes, what, free=True)


def _sum(ssn: Session, nodes: frozenset[str], what: str, free: bool) -> int:
    """cpu, memory or cards of a type on the nodes: what is idle (`free`: cards no slice of
    which is used) or what they have in all, used or not (cards: the healthy ones)."""
    out = 0
    for name in nodes:
        n = ssn.nodes.get(name)
        if n is None:
            continue
        if what == "cpu":
            out += n.idle.cpu if free else n.allocatable.cpu
        elif what == "memory":
            out += n.idle.memory if free else n.allocatable.memory
        else:
            out += sum(1 for c in n.cards if c.spec.healthy and (not free or c.usage.slices_used == 0)
                       and (c.spec.type == what or c.spec.type.startswith(what)))  # fmt: skip
    return out


def _amount(what: str, v: int) -> str:
    if what == "cpu":
        return f"{v / 1000:g} cpu"
    if what == "memory":
        return f"{v}Mi memory"
    return f"{v} free {what} cards"


def _total(ssn: Session, nodes: frozenset[str], what: str) -> int:
    return _sum(ssn, nodes, what, free=False)


def _shown(what: str, v: int, free: bool) -> str:
    if what in ("cpu", "memory"):
        return _amount(what, v)
    return f"{v} free {what} cards" if free else f"{v} {what} cards"


def _raise_to(topo: Topology, tier: int) -> str:
    """The words for raising highestTierAllowed to `tier`."""
    if tier == topo.root_tier:
        return (f"raise spec.networkTopology.highestTierAllowed to {tier} (above the cluster's "
                "top tier: anywhere in the cluster)")  # fmt: skip
    return f"raise spec.networkTopology.highestTierAllowed to {tier}"


#: the nodes of a gang's running pods a wait names before "and N more"
NODES_SHOWN = 3


def _nodes_shown(nodes: list[str], more: bool) -> str:
    """The first `NODES_SHOWN` nodes, and (`more`: rules generation 3, `TOPOLOGY_NODES_WORDS`)
    how many are left out: three names alone read as all the gang's nodes."""
    shown = ", ".join(nodes[:NODES_SHOWN])
    if more and len(nodes) > NODES_SHOWN:
        left = len(nodes) - NODES_SHOWN
        shown += f" (and {left} more node{'s' if left > 1 else ''})"
    return shown


def refusal_words(
    ssn: Session, job: JobInfo, topo: Topology, limit: int | None, items: list[TaskInfo],
    tries: list[_Try], placed: list[TaskInfo],
) -> tuple[str, str]:  # fmt: skip
    """(why, unblock) for a hard gang no allowed HyperNode holds."""
    allowed = [t for t in topo.real_tiers if limit is None or t <= limit]
    name = job.spec.network_topology.highest_tier_name if job.spec.network_topology else ""
    if not allowed and name and name not in topo.tier_names:
        return (f"highestTierName {name}: no HyperNode has that tierName (the cluster's: "
                f"{', '.join(sorted(topo.tier_names)) or 'none'})", "correct spec.networkTopology.highestTierName")  # fmt: skip
    wanted, total = _demand(job, items)
    if placed:  # the candidates were those holding the running pods too
        tier = allowed[-1] if allowed else limit
        nodes = _nodes_shown(sorted({t.node for t in placed}), ssn.conf.rules >= TOPOLOGY_NODES_WORDS)
        up = next((t for t in topo.tiers if limit is None or t > limit), topo.root_tier)
        return (f"{len(placed)} pods of the gang run on {nodes}: no HyperNode of tier <= {tier} "
                f"holds them and room for {wanted} more", "let the gang's running pods finish, "
                f"or {_raise_to(topo, up)}")  # fmt: skip
    if not allowed:
        lowest = topo.tiers[0]
        if not topo.real_tiers:
            return (f"highestTierAllowed {limit}: the cluster has no HyperNodes, and the tier of "
                    f"its virtual root (every node) is {lowest}", _raise_to(topo, lowest))  # fmt: skip
        return (f"highestTierAllowed {limit} is below every HyperNode's tier (the lowest is "
                f"tier {lowest})", f"raise spec.networkTopology.highestTierAllowed to {lowest} or more")  # fmt: skip
    tier = allowed[-1]
    above = [t for t in topo.tiers if t > tier]  # the root's at least
    candidates = topo.by_tier[tier]
    for what in [k for k in total if k not in ("cpu", "memory")] + ["cpu", "memory"]:
        need = total.get(what, 0)
        if not need:
            continue
        whole = {h: _total(ssn, topo.nodes[h], what) for h in candidates}
        largest = max(sorted(whole), key=lambda h: whole[h])
        if whole[largest] < need:  # freeing room never helps: only a higher tier can
            up = next((t for t in above
                       if max(_total(ssn, topo.nodes[h], what) for h in topo.by_tier[t]) >= need), None)  # fmt: skip
            why = (f"no tier-{tier} HyperNode has {_shown(what, need, False)} in all; the "
                   f"largest, {largest}, has {_shown(what, whole[largest], False)}")
            if up is None:
                return why, (f"the cluster has {_shown(what, _total(ssn, topo.nodes[ROOT], what), False)} "
                             "in all: add nodes, or ask for less")  # fmt: skip
            return why, _raise_to(topo, up)
        have = {h: _free(ssn, topo.nodes[h], what) for h in candidates}
        best = max(sorted(have), key=lambda h: have[h])
        if have[best] < need:
            has = _amount(what, have[best]) if what in ("cpu", "memory") else str(have[best])
            return (f"no tier-{tier} HyperNode has {_shown(what, need, True)}; {best} has {has}",
                    f"free room in one tier-{tier} HyperNode, or {_raise_to(topo, above[0])}")  # fmt: skip
    at_tier = [t for t in tries if t.tier == tier]
    most = (
        max(sorted(at_tier, key=lambda t: t.hypernode), key=lambda t: t.placed) if at_tier else None
    )
    fits = f"; {most.hypernode} fits {most.placed} of them" if most is not None else ""
    return (f"no tier-{tier} HyperNode holds the gang's {wanted} pods at once{fits}",
            f"free room in one tier-{tier} HyperNode, or {_raise_to(topo, above[0])}")  # fmt: skip
