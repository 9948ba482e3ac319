"""`tessera apply` of Volcano HyperNodes and a gang's networkTopology (issue 25): the objects as
Volcano writes them are appended as `HyperNodeChanged` (unchanged when the same again, configured
when changed), bad ones refused by field path in the CRD's and webhook's words."""

from __future__ import annotations

from contracts.api import ACCEPTED, CONFIGURED, REJECTED, UNCHANGED
from contracts.events import HyperNodeChanged
from contracts.workloads import HyperNodeMember, LabelRequirement, NetworkTopology
from services.admission.plan import Known, fold_known, plan_apply

HYPERNODES = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: s0}
spec:
  tier: 1
  tierName: superpod
  members:
  - {type: Node, selector: {exactMatch: {name: node-0}}}
  - {type: Node, selector: {regexMatch: {pattern: "^node-1[0-9]$"}}}
  - {type: Node, selector: {labelMatch: {matchLabels: {superpod: sp0}}}}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  members: [{type: HyperNode, selector: {exactMatch: {name: s0}}}]
"""

BAD = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: bad}
spec:
  members:
  - {type: Switch, selector: {exactMatch: {name: a}}}
  - {type: Node, selector: {exactMatch: {name: a}, regexMatch: {pattern: a}}}
  - {type: Node, selector: {}}
  - {type: Node, selector: {regexMatch: {pattern: "(unclosed"}}}
  - {type: HyperNode, selector: {regexMatch: {pattern: "s.*"}}}
  - {type: Node, selector: {exactMatch: {name: Not_A_Name}}, extra: 1}
"""

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: default}
spec:
  minAvailable: 2
  networkTopology: {mode: hard, highestTierAllowed: 1}
  tasks: [{name: w, replicas: 2, template: {spec: {containers: [{name: c, image: busybox}]}}}]
"""


def test_hypernodes_are_appended_as_volcano_wrote_them_and_unchanged_again() -> None:
    plan = plan_apply(HYPERNODES, Known(), None, frozenset())
    assert [(r.kind, r.name, r.outcome) for r in plan.results] == [
        ("HyperNode", "s0", ACCEPTED), ("HyperNode", "spine", ACCEPTED)]  # fmt: skip
    s0 = plan.writes[0].event
    assert s0 == HyperNodeChanged(name="s0", tier=1, tier_name="superpod", members=(
        HyperNodeMember(type="Node", exact="node-0"),
        HyperNodeMember(type="Node", regex="^node-1[0-9]$"),
        HyperNodeMember(type="Node", labels=(LabelRequirement(key="superpod", operator="In", values=("sp0",)),)),
    ))  # fmt: skip
    known = Known()
    for seq, w in enumerate(plan.writes, 1):
        fold_known(known, seq, "topo", w.event)
    again = plan_apply(HYPERNODES, known, None, frozenset())
    assert [r.outcome for r in again.results] == [UNCHANGED, UNCHANGED] and not again.writes
    changed = plan_apply(HYPERNODES.replace("tier: 2", "tier: 3"), known, None, frozenset())
    assert [r.outcome for r in changed.results] == [UNCHANGED, CONFIGURED]
    assert changed.writes[0].expected_seq == 2  # the spine's subject, as folded


def test_a_bad_hypernode_is_refused_naming_every_rule() -> None:
    plan = plan_apply(BAD, Known(), None, frozenset())
    (result,) = plan.results
    assert result.outcome == REJECTED and not plan.writes
    assert result.reasons == ("spec.members[5].extra: unknown field",)  # strict fields first
    strict = plan_apply(BAD.replace(", extra: 1", ""), Known(), None, frozenset())
    assert strict.results[0].reasons[:-1] == (
        "spec.tier: Required value",
        'spec.members[0].type: Unsupported value: "Switch": supported values: "Node", "HyperNode"',
        'spec.members[1].selector: Invalid value: "object": Only one of ExactMatch, RegexMatch, or LabelMatch can be specified',
        'spec.members[2].selector: Invalid value: "object": Either ExactMatch or RegexMatch or LabelMatch must be specified',
        'spec.members[3].selector.regexMatch.pattern: Invalid value: "(unclosed": member regexMatch pattern is '
        "invalid: error parsing regexp: missing closing ): `(unclosed`",
        "spec.members[4].selector.regexMatch: Forbidden: a HyperNode member is chosen by exactMatch only "
        "(Volcano ignores regexMatch and labelMatch on one)",
    )  # fmt: skip
    assert (
        strict.results[0]
        .reasons[-1]
        .startswith(
            'spec.members[5].selector.exactMatch.name: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain'
        )
    )


def test_a_jobs_network_topology_is_kept_and_a_bad_one_refused() -> None:
    plan = plan_apply(JOB, Known(queues={}), None, frozenset())
    (write,) = plan.writes
    assert write.event.spec.network_topology == NetworkTopology(mode="hard", highest_tier=1)  # type: ignore[attr-defined]
    bad = plan_apply(JOB.replace("mode: hard, highestTierAllowed: 1", "mode: strict, highestTierAllowed: -1"),
                     Known(), None, frozenset())  # fmt: skip
    assert bad.results[0].outcome == REJECTED
    assert bad.results[0].reasons == (
        'spec.networkTopology.mode: Unsupported value: "strict": supported values: "hard", "soft"',
        "spec.networkTopology.highestTierAllowed: Invalid value: -1: must be an integer >= 0",
    )
    loose = plan_apply(JOB.replace(", highestTierAllowed: 1", ""), Known(), None, frozenset())
    assert loose.results[0].outcome == ACCEPTED
    assert loose.results[0].warnings == ("spec.networkTopology: no highestTierAllowed or highestTierName: the "
                                         "gang is placed without a network-topology constraint (value: hard)",)  # fmt: skip


def test_highest_tier_allowed_and_name_together_are_refused_for_jobs_and_podgroups() -> None:
    """Volcano's Job and PodGroup webhooks (`validateNetworkTopology`) refuse the pair; Tessera
    accepted it and used the tier."""
    words = ("spec.networkTopology: must not specify 'highestTierAllowed' and 'highestTierName' in "
             "networkTopology simultaneously")  # fmt: skip
    job = JOB.replace("highestTierAllowed: 1", "highestTierAllowed: 1, highestTierName: spine")
    podgroup = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pgboth, namespace: default}
spec: {minMember: 1, networkTopology: {mode: hard, highestTierAllowed: 1, highestTierName: spine}}
"""
    for doc in (job, podgroup):
        plan = plan_apply(doc, Known(), None, frozenset())
        assert plan.results[0].outcome == REJECTED and words in plan.results[0].reasons, plan.results
    one = plan_apply(podgroup.replace("highestTierAllowed: 1, ", ""), Known(), None, frozenset())
    assert one.results[0].outcome != REJECTED, one.results


def test_regex_members_are_go_regexps() -> None:
    """Volcano's webhook compiles a regexMatch with Go's regexp: RE2 that Python's `re` lacks is
    accepted (a POSIX class, `\\z`), what RE2 refuses and Python accepts is refused in Go's
    words (a backreference, lookahead), and valid RE2 Python cannot express is said to be so."""
    doc = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: r1}
spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: 'PATTERN'}}}]}
"""
    for good in (r"^rack1-n-[[:digit:]]+$", r"^rack1-n-\d+\z"):
        plan = plan_apply(doc.replace("PATTERN", good), Known(), None, frozenset())
        assert plan.results[0].outcome == ACCEPTED, plan.results
    path = "spec.members[0].selector.regexMatch.pattern"
    for bad, words in (
        (r"^(a)\1$", "error parsing regexp: invalid escape sequence: `\\1`"),
        (r"^s1-(?=n)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
        (r"^\pL", "the Unicode class \\pL is valid RE2 but has no equivalent in Tessera's matcher"),
    ):
        plan = plan_apply(doc.replace("PATTERN", bad), Known(), None, frozenset())
        assert plan.results[0].outcome == REJECTED
        (reason,) = plan.results[0].reasons
        assert reason.startswith(f"{path}: Invalid value: ") and reason.endswith(
            f": member regexMatch pattern is invalid: {words}"), reason  # fmt: skip
