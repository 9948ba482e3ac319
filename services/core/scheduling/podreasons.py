"""Why a pod waits, in words (the `FailedScheduling` Event and the `PodScheduled=False`
condition): kube-scheduler's "0/4 nodes are available: …" line. Where kube-scheduler has words
for a reason they are kept as it says them ("1 node(s) were unschedulable", "2 Insufficient
cpu", "1 node(s) had untolerated taint {dedicated: infer}"): alert rules and runbooks grep for
them. HAMi's codes, which kube-scheduler has no words for, are turned into what the pod asked
for and what the nodes lack ("2 have no Ascend910B3 card with 8192 MB free"). Every node of the
cluster counts in "0/N", a NotReady one too, with the taint kube's node lifecycle controller
puts on it. Pure: the scheduler's per-node reasons and the job's spec in, text out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from contracts.workloads import DeviceRequest, JobSpec
from services.core.devices import registration
from services.core.devices.ascend import (
    RING_BOUND,
    RING_COUNT_NOT_FIT,
    RING_COUNTS_WORDS,
    RING_NOT_FIT,
    RING_SIZE,
)
from services.core.devices.fit import CARD_OTHER_TEMPLATE, CARD_TAKEN_BY_POD
from services.core.devices.mig import CARD_IN_MIG_MODE, MIG_INFEASIBLE, MIG_WORDS

_CODE = re.compile(r"(?:(\d+)/(\d+) )?([A-Z][A-Za-z]+)")
#: kube-scheduler's NodeUnschedulable words, and the taint a cordon reads as
UNSCHEDULABLE, CORDON_TAINT = "node(s) were unschedulable", "node.kubernetes.io/unschedulable"
#: kube-scheduler's words for a NotReady node: its TaintToleration refusing the taint the node
#: lifecycle controller puts on it (a pod tolerating it is not placed there by Tessera either)
NOT_READY = "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
_GANG = re.compile(r"\d+/\d+ tasks (?:in gang )?unschedulable")


def _ask(spec: JobSpec | None) -> DeviceRequest | None:
    for t in spec.tasks if spec else ():
        for d in t.devices:
            return d
    return None


def _card(d: DeviceRequest | None) -> str:
    if d is None:
        return "matching"
    return d.type if d.type else "matching"


def phrase(reason: str, spec: JobSpec | None) -> str:
    """One node's reason as the rest of "N nodes …"."""
    d = _ask(spec)
    low = reason.lower()
    if CORDON_TAINT in reason or UNSCHEDULABLE in low:
        return UNSCHEDULABLE  # an older log said the cordon as its taint
    if low.startswith(("node(s) ", "insufficient ")):
        return reason.rstrip(".")  # kube-scheduler's own words (predicates carry them)
    if "not ready" in low or "nodelost" in low or "lost" in low:
        return NOT_READY
    m = _CODE.search(reason)
    code = m.group(3) if m else ""
    card = _card(d)
    if RING_COUNT_NOT_FIT in reason:  # (a family name's pod on 910A cards: no freeing helps)
        n = f", not {d.count}" if d is not None else ""
        return (f"have only {' or '.join(sorted(RING_BOUND))} cards, where a pod asks {RING_COUNTS_WORDS} "
                f"(HCCS rings of {RING_SIZE}){n}")  # fmt: skip
    if RING_NOT_FIT in reason:  # (whatever else the node lacks: its free cards are there, split)
        n = d.count if d is not None else 2
        return (f"have no HCCS ring with {n} free {card} cards (their free cards are split "
                f"across the two rings; a pod of up to {RING_SIZE} must sit in one)")  # fmt: skip
    if code == "CardInsufficientMemory" and d is not None and _whole(d):
        code = "NodeInsufficientDevice"  # HAMi: every card's memory is taken; the ask is cards
    if code == "CardInsufficientMemory" and d is not None:
        amount = f"{d.memory} MB" if d.memory else f"{d.memory_pct}% of its memory"
        return f"have no {card} card with {amount} free"
    if code == "CardInsufficientCore" and d is not None:
        return f"have no {card} card with {d.cores} cores free"
    if code == "NodeInsufficientDevice":
        n = d.count if d is not None else 1
        return f"have no free {card} card" if n == 1 else f"have fewer than {n} free {card} cards"
    if code == "CardTypeMismatch":
        return f"have no {card} card"
    if code == "CardTimeSlicingExhausted" and registration.IN_USE in reason:
        return "are full: " + reason[reason.find(": ") + 2:].rstrip(".")  # a vendor plugin's whole cards
    if code in ("CardTimeSlicingExhausted", "CardComputeUnitsExhausted"):
        return f"have no {card} card with a free slice (all slices of the split count are taken)"
    if code == CARD_OTHER_TEMPLATE:
        return (f"have too few {card} cards for the pod's vNPU templates (one card carves one "
                "template for a pod; ask one size in every container to share a card)")  # fmt: skip
    if code == CARD_TAKEN_BY_POD:
        return f"have too few {card} cards for the pod's containers (a whole card is its container's own)"
    if code == "CardNotHealth":
        return f"have no healthy {card} card"
    if code == CARD_IN_MIG_MODE:
        return f"have their {card} cards in {MIG_WORDS}"
    if code == MIG_INFEASIBLE:
        return (f"have no {card} card in MIG mode with a free placement for a MIG profile that "
                "holds the memory asked (knownMigGeometries)")  # fmt: skip
    if code == "CardCordoned":
        return f"have their {card} cards cordoned (hami.io/device-cordon)"
    return reason.rstrip(".")


_SINGULAR = (("are ", "is "), ("have ", "has "), ("do not ", "does not "))


def _one(p: str) -> str:
    """The phrase for one node ("1 is cordoned", "1 has no free … card")."""
    for many, one in _SINGULAR:
        if p.startswith(many):
            return one + p.removeprefix(many).replace("their ", "its ", 1)
    return p


def _whole(d: DeviceRequest) -> bool:
    """A request for whole cards (no memory amount): short memory means short free cards."""
    return d.exclusive or (not d.memory and d.memory_pct >= 100)


def nodes_line(node_reasons: Mapping[str, str], total: int, spec: JobSpec | None,
               reason_counts: Mapping[str, int] | None = None, not_ready: int = 0) -> str:  # fmt: skip
    """`0/4 nodes are available: 2 have no …, 2 node(s) were unschedulable.` (largest groups
    first); counted from `reason_counts` when the scheduler sent a sample of the nodes.
    `not_ready`: nodes of the cluster that are not Ready, which no session looks at (they
    have no reason of their own) and kube-scheduler counts all the same."""
    counts: Counter[str] = Counter()
    if reason_counts:
        for r, n in reason_counts.items():
            counts[phrase(r, spec)] += n
    else:
        counts.update(phrase(r, spec) for r in node_reasons.values())
    if not_ready > 0:
        counts[NOT_READY] += not_ready
    parts = ", ".join(f"{n} {p if n > 1 else _one(p)}"
                      for p, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))  # fmt: skip
    total = max(total, sum(counts.values()))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."


def message(reason: str, node_reasons: Mapping[str, str], total: int, spec: JobSpec | None,
            why: str = "", reason_counts: Mapping[str, int] | None = None, not_ready: int = 0) -> str:  # fmt: skip
    """The whole text: per-node reasons when the scheduler gave them, after Volcano's gang
    count ("2/4 tasks in gang unschedulable: 0/2 nodes are available: …") and followed by the
    first rule that failed in words when that is a job-level rule (`JobUnschedulable.why`: the
    queue, the gang against the cluster's cards); else that rule alone, else the scheduler's
    reason as is (an older log)."""
    if node_reasons:
        text = nodes_line(node_reasons, total, spec, reason_counts, not_ready)
        gang = _GANG.search(reason)
        if gang:
            text = f"{gang.group(0)}: {text}"
        if why and not why.startswith("0/"):  # a nodes line says what the line above says
            text = f"{text} {why[:1].upper()}{why[1:].rstrip('.')}."
        return text
    return why or reason
