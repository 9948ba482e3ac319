"""explain's words for a pod its PersistentVolumeClaims hold (issue 22): the claim by name and
what would let the pod run, before any node rule; per node, the volume and its node affinity.
Rows from the volumes table, so the scenarios and the words cannot drift apart."""

from __future__ import annotations

from contracts.events import ClaimChanged, VolumeChanged
from contracts.workloads import LabelRequirement
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from tests.core.scheduling.scenarios import _simulation, bound_of, load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("volumes")}


def test_a_missing_claim_is_named_with_what_creates_it() -> None:
    u = unschedulable(ROWS["claim-not-found"], "default/app")
    assert u.plugin == "VolumeBinding"
    assert u.why == ('persistentvolumeclaim "data" not found: pod app names PersistentVolumeClaim '
                     "default/data, which does not exist")  # fmt: skip
    assert u.unblock.startswith("create PersistentVolumeClaim default/data")
    assert u.node_reasons == {}  # no node was filtered for it


def test_an_unbound_immediate_claim_says_who_binds_it() -> None:
    u = unschedulable(ROWS["unbound-immediate-waits"], "default/app")
    assert u.plugin == "VolumeBinding"
    assert u.why.startswith("pod has unbound immediate PersistentVolumeClaims: pod app's claim "
                            "default/data is not bound"), u.why  # fmt: skip
    assert "WaitForFirstConsumer" in u.unblock


def test_a_local_volume_on_a_full_node_names_the_volume_and_where_it_is() -> None:
    u = unschedulable(ROWS["local-volume-on-a-node-that-is-full"], "default/app")
    words = {g.reason: g for g in u.groups}
    conflict = ("claim data is bound to PersistentVolume local-n2, whose node affinity n1 does "
                "not match (node(s) had volume node affinity conflict)")  # fmt: skip
    assert conflict in words and words[conflict].plugin == "VolumeBinding", list(words)
    assert any(g.reason.startswith("cpu: asked 2") for g in u.groups)  # n2, the volume's node


def test_a_selected_node_is_named() -> None:
    u = unschedulable(ROWS["selected-node-full-waits"], "default/app")
    reasons = [g.reason for g in u.groups]
    assert any(
        r.startswith("claim data was selected for node n2 (volume.kubernetes.io/selected-node)")
        for r in reasons
    ), reasons


def test_the_pod_is_scheduled_once_its_claim_appears_and_follows_its_volume() -> None:
    """The same log, later: the claim is made and bound to a local volume on n1 — the pod that
    waited is placed there (no resubmission: the claim's event is what changed)."""
    sc = ROWS["claim-not-found"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    conf = parse_conf(sc.conf)
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {}
    on_n1 = ((LabelRequirement(key="kubernetes.io/hostname", operator="In", values=("n1",)),),)
    sim.emit(VolumeChanged(name="local-n1", node_affinity=on_n1, phase="Bound"))
    sim.emit(ClaimChanged(namespace="default", name="data", volume="local-n1", phase="Bound"))
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {"default/app": "n1"}


def test_allowed_topologies_are_named() -> None:
    u = unschedulable(ROWS["allowed-topologies-nowhere-with-room"], "default/app")
    assert [g.reason for g in u.groups] == [
        "claim data's StorageClass provisions only where topology.kubernetes.io/zone In [a] "
        "(allowedTopologies), not on n1 (node(s) didn't find available persistent volumes to bind)"
    ]
    assert u.plugin == "VolumeBinding"
