"""A pod affinity term's namespaceSelector reads the labels of the namespaces the log holds
(`NamespaceChanged`): the review's case — a required anti-affinity selecting namespaces by a
label other than `kubernetes.io/metadata.name` selected nothing, so the pod was placed beside
the pod it must avoid, and a required affinity so written waited for ever. A label changed
later is what the next session reads; refusals of the jobs it may concern are lifted; the
projection's snapshot and a replay hold the same labels."""

from __future__ import annotations

import msgspec

from contracts.events import NamespaceChanged, NamespaceDeleted
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.projection_state import ProjectionState, projection_of, state_of
from services.core.scheduling.view import SchedulerView
from services.core.workload import admit, load_documents
from services.core.workload.namespaces import namespace_event
from tests.core.scheduling.scenarios import _simulation, bound_of, load_table

ROWS = {sc.name: sc for sc in load_table("podaffinity")}
NAME = "kubernetes.io/metadata.name"


def test_a_namespace_labelled_later_lets_the_waiting_pod_in() -> None:
    """The affinity's namespace lacks the label: the pod waits; the label added (the same log,
    later), the next session places it by the pod it asks for."""
    sc = ROWS["affinity-namespace-selector-label-missing"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    conf = parse_conf(sc.conf)
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {}
    sim.emit(NamespaceChanged(name="team", labels={"team": "db", NAME: "team"}))
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {"default/new": "n2"}


def test_a_label_taken_away_or_a_namespace_deleted_frees_the_node() -> None:
    """The anti-affinity holds while the namespace carries the label; once the label is gone
    (or the Namespace is), its pods are no longer selected."""
    sc = ROWS["anti-affinity-namespace-selector-by-label"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    conf = parse_conf(sc.conf)
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {}
    sim.emit(NamespaceChanged(name="team", labels={"team": "web", NAME: "team"}))
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {"default/new": "n2"}
    sim.emit(NamespaceChanged(name="team", labels={"team": "db", NAME: "team"}))
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {}
    sim.emit(NamespaceDeleted(name="team"))
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {"default/new": "n2"}


def test_an_empty_namespace_selector_is_every_namespace_and_an_unknown_one_has_its_name() -> None:
    """`{}` selects every namespace whatever its labels; a namespace with no Namespace in the
    log still has its name label (the API server gives every namespace one)."""
    sc = ROWS["affinity-namespace-selector-by-name"]  # namespace `ns`: no Namespace object
    sim = _simulation(sc, cycles=0)
    sim.run()
    assert "ns" not in sim.projection.snapshot().namespaces
    assert bound_of(decide(sim.projection.snapshot(), parse_conf(sc.conf))) == {"default/new": "n1"}
    sc = ROWS["affinity-namespace-selector-everything"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    assert bound_of(decide(sim.projection.snapshot(), parse_conf(sc.conf))) == {"default/new": "n1"}


def test_a_namespace_is_read_as_the_api_server_keeps_it() -> None:
    """Its name label is its name whatever was written; its name a DNS-1123 label; its labels
    valid label keys and values — else refused with the field and the rule."""
    event, problems = namespace_event({"metadata": {"name": "team", "labels": {"team": "db", NAME: "x"}}})
    assert problems == [] and event == NamespaceChanged(name="team", labels={"team": "db", NAME: "team"})
    docs = load_documents("{apiVersion: v1, kind: Namespace, metadata: {name: Team_A}}\n---\n"
                          "{apiVersion: v1, kind: Namespace, metadata: {name: b, labels: {'bad key!': x}}}\n---\n"
                          "{apiVersion: v1, kind: Namespace, metadata: {name: ok}, spec: {finalizers: [kubernetes]}}")
    workload = admit(docs, None, frozenset())
    assert workload.namespaces == (NamespaceChanged(name="ok", labels={NAME: "ok"}),)
    assert {(r.kind, r.name, r.path) for r in workload.rejections} == {
        ("Namespace", "Team_A", "metadata.name"), ("Namespace", "b", "metadata.labels")}


def test_the_projection_keeps_namespaces_through_its_snapshot_and_a_replay() -> None:
    """A restored projection (its stored state) holds the labels a fold from #1 does."""
    events = [NamespaceChanged(name="a", labels={"x": "1", NAME: "a"}),
              NamespaceChanged(name="b", labels={NAME: "b"}),
              NamespaceChanged(name="a", labels={"x": "2", NAME: "a"}),
              NamespaceDeleted(name="b")]  # fmt: skip
    p = st.ClusterProjection()
    for i, e in enumerate(events, 1):
        p.apply(i, e)
    assert p.snapshot().namespaces == {"a": {"x": "2", NAME: "a"}}
    data = msgspec.msgpack.encode(state_of(p))
    restored = projection_of(msgspec.msgpack.decode(data, type=ProjectionState))
    assert restored.snapshot().namespaces == p.snapshot().namespaces
    restored.apply(5, NamespaceChanged(name="c", labels={NAME: "c"}))  # and goes on folding
    assert set(restored.snapshot().namespaces) == {"a", "c"}


def test_a_namespace_change_lifts_the_refusals_it_may_concern() -> None:
    """The allocator's refusals of a job stand until what they depend on changes; a namespace's
    labels are part of how its pods (and pods selecting namespaces by label) are judged."""
    sc = ROWS["affinity-namespace-selector-label-missing"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    view = SchedulerView(projection=sim.projection)
    refused = st.Refused({"n1": "card gone"})
    view.refused = {"default/new": refused, "team/pre": refused, "elsewhere/x": refused,
                    "team/held": st.Refused(until=99.0, held="refused by the API server")}  # fmt: skip
    view.apply(sim.projection.seq + 1, NamespaceChanged(name="other", labels={NAME: "other"}))
    assert set(view.refused) == {"team/pre", "elsewhere/x", "team/held"}  # new selects by label
    view.apply(sim.projection.seq + 1, NamespaceChanged(name="team", labels={"team": "db", NAME: "team"}))
    assert set(view.refused) == {"elsewhere/x", "team/held"}
