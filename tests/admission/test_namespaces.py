"""`tessera apply` of Namespaces: their labels are appended as `NamespaceChanged` (the name
label added as the API server adds it; unchanged when the same again, configured when the
labels change), for pod affinity's namespaceSelector."""

from __future__ import annotations

from contracts.api import ACCEPTED, CONFIGURED, UNCHANGED
from contracts.events import NamespaceChanged, NamespaceDeleted
from contracts.subjects import Subjects, subject_of
from services.admission.plan import Known, fold_known, plan_apply

NAMESPACES = """
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {team: db}}
---
apiVersion: v1
kind: Namespace
metadata: {name: web}
"""


def test_namespaces_are_appended_with_their_labels_and_unchanged_again() -> None:
    plan = plan_apply(NAMESPACES, Known(), None, frozenset())
    assert [(r.kind, r.namespace, r.name, r.outcome) for r in plan.results] == [
        ("Namespace", "", "team", ACCEPTED), ("Namespace", "", "web", ACCEPTED)]  # fmt: skip
    assert [w.event for w in plan.writes] == [
        NamespaceChanged(name="team", labels={"team": "db", "kubernetes.io/metadata.name": "team"}),
        NamespaceChanged(name="web", labels={"kubernetes.io/metadata.name": "web"}),
    ]
    assert subject_of(Subjects(), plan.writes[0].event) == "tessera.ev.ns.team"
    known = Known()
    for seq, w in enumerate(plan.writes, 1):
        fold_known(known, seq, "ns", w.event)
    again = plan_apply(NAMESPACES, known, None, frozenset())
    assert [r.outcome for r in again.results] == [UNCHANGED, UNCHANGED] and not again.writes
    changed = plan_apply(NAMESPACES.replace("team: db", "team: cache"), known, None, frozenset())
    assert [r.outcome for r in changed.results] == [CONFIGURED, UNCHANGED]
    assert changed.writes[0].expected_seq == 1  # the team subject, as folded
    fold_known(known, 3, "ns", NamespaceDeleted(name="team"))  # gone from the API server
    back = plan_apply(NAMESPACES, known, None, frozenset())
    assert [r.outcome for r in back.results] == [ACCEPTED, UNCHANGED]
    assert back.writes[0].expected_seq == 3
