"""What a session writes about itself next to its decisions, so the log alone can re-run it.

Every decision event a session appends (`JobPhaseChanged` Inqueue, `EvictionRequested`,
`PlacementProposed`, `JobUnschedulable`) carries headers naming the session: its number, the
stream sequence its snapshot is based on, its clock, the `SchedulerConfigured` event it ran with,
and digests of each input (configuration, nodes, cards, queues, jobs, clock). A re-run that
differs can then say which input differs, not only that something did.

`decision_events` is the one rule, shared by the scheduler service, the simulation and
`tessera replay --verify`, for which of a session's conclusions become events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

import msgspec

from contracts.base import Event
from contracts.events import (
    EvictionRequested,
    JobPhaseChanged,
    JobUnschedulable,
    PlacementProposed,
    SchedulerConfigured,
    TaskPlacement,
)
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import SchedulerConf
from services.core.scheduling.decisions import Decisions, JobPlacement, Unschedulable, by_words
from services.core.scheduling.memo import SessionMemo
from services.core.scheduling.storage import NO_STORAGE

SESSION = "Tessera-Session"
BASED_ON = "Tessera-Based-On"
NOW = "Tessera-Now"
CONF = "Tessera-Conf"
INPUTS = "Tessera-Inputs"

#: The event types a session decides; any other event in a session's span is a consequence.
DECISION_TYPES = frozenset(
    t.type_name() for t in (JobPhaseChanged, EvictionRequested, PlacementProposed, JobUnschedulable)
)
#: The inputs a digest is kept of, in the order a divergence names them.
INPUT_NAMES = ("conf", "now", "nodes", "cards", "queues", "jobs", "storage", "quotas", "hypernodes", "started", "budgets",
               "namespaces")

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")


@dataclass(frozen=True, slots=True)
class SessionRef:
    session: int
    based_on: int
    now: float
    conf_seq: int
    inputs: Mapping[str, str] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        return {
            SESSION: str(self.session),
            BASED_ON: str(self.based_on),
            NOW: repr(self.now),
            CONF: str(self.conf_seq),
            INPUTS: " ".join(f"{k}={v}" for k, v in self.inputs.items()),
        }


def ref_of(headers: Mapping[str, str]) -> SessionRef | None:
    """The session a stored decision came from; None for a message no session wrote (or one
    written before sessions recorded themselves)."""
    if BASED_ON not in headers or CONF not in headers:
        return None
    try:
        inputs = dict(p.split("=", 1) for p in headers.get(INPUTS, "").split() if "=" in p)
        return SessionRef(int(headers.get(SESSION, "0")), int(headers[BASED_ON]),
                          float(headers.get(NOW, "0")), int(headers[CONF]), inputs)  # fmt: skip
    except ValueError:
        return None


def _digest(value: object) -> str:
    return hashlib.blake2b(_ENCODER.encode(value), digest_size=6).hexdigest()


def conf_digest(conf: SchedulerConfigured) -> str:
    return _digest((conf.conf, conf.device_config, conf.mode))


def _node_input(n: st.NodeSnap) -> tuple[object, ...]:
    return (n.name, n.cpu_milli, n.memory_mib, n.pods, n.labels, n.annotations, n.taints, n.ready,
            *((n.held,) if any(n.held) else ()), *((n.others,) if n.others else ()),
            *((n.resources,) if n.resources else ()), *((n.held_resources,) if n.held_resources else ()),
            # (only where they take cards: digests of logs from before plugin cards stay theirs)
            *((("devices", n.held_devices),) if n.held_devices and any(c.spec.mode == "plugin" for c in n.cards)
              else ()))  # fmt: skip


def _array_header(n: int) -> bytes:
    """msgpack's header of an n-element array: an encoded list is it and its elements' own
    encodings one after the other (tests/core/scheduling/test_session_memo.py checks it)."""
    if n < 16:
        return bytes((0x90 | n,))
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _digest_of_list(count: int, parts: list[bytes]) -> str:
    """`_digest(list)` from its elements' encodings (equal bytes, so equal digests)."""
    h = hashlib.blake2b(_array_header(count), digest_size=6)
    for part in parts:
        h.update(part)
    return h.hexdigest()


def _kept_inputs(snap: st.Snapshot, memo: SessionMemo) -> tuple[str, str, str]:
    """The nodes', cards' and jobs' digests, encoding only the nodes and jobs whose frozen
    snapshot is not the one encoded last time (the projection keeps an unchanged node's or
    job's: `ClusterProjection.snapshot`); encoding the 1,213 nodes' and their 6,212 cards'
    inputs for every session was a fifth of a session on the openb trace."""
    kept_nodes, kept_jobs = memo.node_bytes, memo.job_bytes
    node_parts, card_parts, cards = [], [], 0
    for n in snap.nodes:
        got = kept_nodes.get(n.name)
        if got is None or got[0] is not n:
            got = kept_nodes[n.name] = (n, _ENCODER.encode(_node_input(n)),
                                        b"".join(_ENCODER.encode((c.spec, c.usage, c.seq)) for c in n.cards))  # fmt: skip
        node_parts.append(got[1])
        card_parts.append(got[2])
        cards += len(n.cards)
    job_parts = []
    for j in snap.jobs:
        key = j.key
        got_job = kept_jobs.get(key)
        if got_job is None or got_job[0] is not j:
            got_job = kept_jobs[key] = (j, _ENCODER.encode(j))
        job_parts.append(got_job[1])
    if len(kept_nodes) > 2 * len(snap.nodes) + 64:
        names = {n.name for n in snap.nodes}
        for name in [k for k in kept_nodes if k not in names]:
            del kept_nodes[name]
    if len(kept_jobs) > 2 * len(snap.jobs) + 64:
        keys = {j.key for j in snap.jobs}
        for key in [k for k in kept_jobs if k not in keys]:
            del kept_jobs[key]
    return (_digest_of_list(len(snap.nodes), node_parts), _digest_of_list(cards, card_parts),
            _digest_of_list(len(snap.jobs), job_parts))  # fmt: skip


def input_digests(
    snap: st.Snapshot, conf: SchedulerConfigured, memo: SessionMemo | None = None
) -> dict[str, str]:
    """One short digest per input of a session (`INPUT_NAMES`); `memo` (the caller's session
    memo) keeps the encodings of unchanged nodes and jobs, for equal digests at less cost."""
    if memo is None:
        nodes = _digest([_node_input(n) for n in snap.nodes])
        cards = _digest([(c.spec, c.usage, c.seq) for n in snap.nodes for c in n.cards])
        jobs = _digest(list(snap.jobs))
    else:
        nodes, cards, jobs = _kept_inputs(snap, memo)
    return {
        "conf": conf_digest(conf),
        "now": _digest(snap.now),
        "nodes": nodes,
        "cards": cards,
        "queues": _digest(list(snap.queues)),
        "jobs": jobs,
        # claims, volumes, classes: only where the log has any (older records have none)
        **({"storage": _digest((dict(storage.claims), dict(storage.volumes), dict(storage.classes)))}
           if (storage := snap.storage) is not NO_STORAGE else {}),
        **({"quotas": _digest(dict(snap.quotas.by_namespace))} if snap.quotas else {}),
        **({"hypernodes": _digest(list(snap.hypernodes))} if snap.hypernodes else {}),
        **({"started": _digest(sorted(snap.started.items()))} if snap.started else {}),
        **({"budgets": _digest(list(snap.budgets))} if snap.budgets else {}),
        **({"namespaces": _digest(snap.namespaces)} if snap.namespaces else {}),
    }


def decision_events(
    decisions: Decisions,
    *,
    session: int,
    mode: str,
    outstanding: Mapping[str, int],
    last_reasons: Mapping[str, str],
    proposed: MutableMapping[str, tuple[TaskPlacement, ...]],
    admits_in_proposal: bool = False,
    verdicts_by_words: bool = False,
    pipelines_end: bool = False,
) -> list[Event]:
    """The events a session appends, in order: phase changes, evictions, proposals, pending
    reasons (a reason only when it, or the rule its `why` names, differs from the job's last
    one in the log: `unschedulable_key`).

    `service`: a pipelined job (reserved in the session only) is not proposed, nor a job whose
    proposal the allocator has not answered yet. `simulate`: every committed placement is
    proposed (it commits at once), a pipelined one when it changed (`proposed` remembers).
    `admits_in_proposal` (the configuration record's): a job the session both admits and
    proposes gets no Inqueue event of its own — its proposal says `admits` — since every reader
    of the log paid for a message the proposal right behind it could carry.
    `verdicts_by_words` (the record's too): an enqueue refusal's trial groups of nodes are not what
    must change (`by_words`).
    `pipelines_end` (simulate, rules generation 2): a pipelined reservation lasts one session,
    as Volcano's Pipelined task state does, so a reader must see where it ends. An unchanged
    pipelined proposal is left out only when the session says nothing else of its job, and a
    job pipelined before but not in this session gets its unschedulable reason even when it
    is unchanged: every decision of a session on a job then names all its reservations, and a
    pod one of them leaves out waits again (`report`: Pipelined back to Pending). Before, a pod
    read "Pipelined on node-a" for good once the room reclaimed for it went to another pod."""
    proposals: list[PlacementProposed] = []
    ended: set[str] = set()  # jobs pipelined before whose reservation this session did not renew
    if mode == "simulate" and pipelines_end:
        now = {f"{jp.namespace}/{jp.name}" for jp in decisions.placements if jp.pipelined}
        ended = {key for key in proposed if key not in now}
        said = {f"{u.namespace}/{u.name}" for u in decisions.unschedulable}
        said |= {f"{jp.namespace}/{jp.name}" for jp in decisions.placements if not jp.pipelined}
        for key in ended & said:  # (one the session says nothing of keeps it: none to say it)
            del proposed[key]
        ended &= said
    for jp in decisions.placements:
        key = f"{jp.namespace}/{jp.name}"
        if mode == "simulate":
            if jp.pipelined:
                if proposed.get(key) == jp.placements and not (pipelines_end and _said_more(decisions, jp, last_reasons,
                                                                                           verdicts_by_words)):
                    continue
                proposed[key] = jp.placements
            else:
                proposed.pop(key, None)
        elif jp.pipelined or key in outstanding:
            continue
        proposals.append(PlacementProposed(namespace=jp.namespace, name=jp.name,
                                           based_on=decisions.based_on, placements=jp.placements,
                                           session=session))  # fmt: skip
    carried = {(p.namespace, p.name) for p in proposals} if admits_in_proposal else set()
    admitted: set[tuple[str, str]] = set()
    out: list[Event] = []
    for ph in decisions.phases:
        if ph.phase == "Inqueue" and not ph.reason and (ph.namespace, ph.name) in carried:
            admitted.add((ph.namespace, ph.name))
            continue
        out.append(JobPhaseChanged(namespace=ph.namespace, name=ph.name, phase=ph.phase,
                                   reason=ph.reason))  # fmt: skip
    if admitted:
        proposals = [msgspec.structs.replace(p, admits=True) if (p.namespace, p.name) in admitted else p
                     for p in proposals]  # fmt: skip
    for ev in decisions.evictions:
        out.append(EvictionRequested(namespace=ev.namespace, name=ev.name, task=ev.task,
                                     reason=ev.reason, for_job=ev.for_job))  # fmt: skip
    out += proposals
    for u in decisions.unschedulable:
        if f"{u.namespace}/{u.name}" in ended or _changed(u, last_reasons, verdicts_by_words):
            out.append(u.event(decisions.based_on, session))
    return out


def _changed(u: Unschedulable, last_reasons: Mapping[str, str], verdicts_by_words: bool) -> bool:
    """Whether `u` differs from its job's last reason in the log (`unschedulable_key`)."""
    last = last_reasons.get(f"{u.namespace}/{u.name}")
    return last is None or (by_words(last) != by_words(u.key) if verdicts_by_words else last != u.key)


def _said_more(decisions: Decisions, jp: JobPlacement, last_reasons: Mapping[str, str],
               verdicts_by_words: bool) -> bool:  # fmt: skip
    """Whether the session appends another decision on `jp`'s job: a committed proposal, or an
    unschedulable reason that changed."""
    same = (jp.namespace, jp.name)
    return any((p.namespace, p.name) == same and not p.pipelined for p in decisions.placements) or any(
        (u.namespace, u.name) == same and _changed(u, last_reasons, verdicts_by_words) for u in decisions.unschedulable
    )


def configured(conf_text: str = "", device_config: str = "", *, scheduler: str = "scheduler",
               mode: str = "service") -> SchedulerConfigured:  # fmt: skip
    """The record of a configuration; no text = the built-in default, written out in full so a
    later binary with other defaults still re-runs these sessions as they ran."""
    from services.core.scheduling.config import DEFAULT_CONF, RULES

    return SchedulerConfigured(scheduler=scheduler, conf=conf_text or DEFAULT_CONF,
                               device_config=device_config, mode=mode, admits_in_proposal=True,
                               verdicts_by_words=True, rules=RULES)  # fmt: skip


def conf_of(record: SchedulerConfigured) -> SchedulerConf:
    """The configuration a record describes, as the scheduler built it from the same texts
    (`ConfigError` / `CatalogueError` for a record that is not a valid configuration)."""
    import dataclasses

    from services.core.devices import build_vendors, load_catalogue
    from services.core.scheduling.config import parse_conf

    conf = dataclasses.replace(parse_conf(record.conf), rules=record.rules)
    if record.device_config:
        conf = dataclasses.replace(conf, vendors=build_vendors(load_catalogue(record.device_config)))
    return conf
