"""explain's words for a pod its PersistentVolumeClaims hold (issue 22): the claim by name and
what would let the pod run, before any node rule; per node, the volume and its node affinity.
Rows from the volumes table, so the scenarios and the words cannot drift apart."""

from __future__ import annotations

import dataclasses

from contracts.events import ClaimChanged, TaskFinished, VolumeChanged
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


RWOP = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"


def test_a_readwriteoncepod_claim_in_use_names_the_pod_holding_it() -> None:
    """Every node refuses alike, in kube-scheduler's words; explain names the holder and where
    it runs, and the fix ends it (preemption may do so for a higher-priority pod)."""
    u = unschedulable(ROWS["rwop-held-by-a-running-pod"], "default/app")
    assert u.plugin == "VolumeRestrictions"
    assert u.node_reasons == {"n1": RWOP, "n2": RWOP}
    assert [(g.reason, g.nodes) for g in u.groups] == [
        (f"claim default/data is ReadWriteOncePod and pod default/holder uses it on n1 ({RWOP})", 2)
    ]
    assert u.unblock.startswith("end default/holder: one pod at a time may use a ReadWriteOncePod claim")


def test_a_gang_whose_pods_share_a_readwriteoncepod_claim_is_told_it_never_starts() -> None:
    """No node, eviction or wait places both pods of one gang on one such claim: explain says
    so, rather than "each pod fits some node now"."""
    u = unschedulable(ROWS["rwop-a-gang-sharing-one-claim-never-starts"], "default/train")
    assert u.plugin == "VolumeRestrictions"
    assert u.why == ("pods train-w-0, train-w-1 of the gang all use PersistentVolumeClaim "
                     "default/shared, whose access mode is ReadWriteOncePod: one pod at a time may "
                     f"use it, and the gang needs 2 pods at once ({RWOP})")  # fmt: skip
    assert "a claim of its own" in u.unblock
    assert RWOP in u.reason  # the gang's message: its second pod fitted no node


def test_the_waiting_pod_takes_the_claim_once_its_holder_is_gone() -> None:
    """The same log, later: the holder's pod ends — the pod that waited is placed (the claim's
    user list is the session's, not a stale count)."""
    sc = ROWS["rwop-held-by-a-running-pod"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    conf = parse_conf(sc.conf)
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {}
    sim.emit(TaskFinished(namespace="default", name="holder", task="holder", node="n1", exit_code=0))
    assert bound_of(decide(sim.projection.snapshot(), conf)) == {"default/app": "n1"}


def test_node_caches_agree_with_a_fresh_evaluation_for_readwriteoncepod_pods() -> None:
    """Pods of one shape on one claim, in one job that needs one of them: the first is placed
    and every other waits, with the node caches on or off — the claim's refusal reads pods on
    other nodes, so an outcome cached on n2 before the first pod went to n1 is stale after."""
    sc = ROWS["rwop-a-gang-sharing-one-claim-never-starts"]
    sc = dataclasses.replace(sc, workload=sc.workload.replace("minAvailable: 2", "minAvailable: 1")
                             .replace("replicas: 2", "replicas: 6"))  # fmt: skip
    sim = _simulation(sc, cycles=0)
    sim.run()
    snap, conf = sim.projection.snapshot(), parse_conf(sc.conf)
    cached, fresh = decide(snap, conf), decide(snap, conf, node_cache=False)
    assert bound_of(cached) == bound_of(fresh) == {"default/train-w-0": "n1"}, bound_of(cached)
    assert [len(p.placements) for p in cached.placements] == [1]


def _pod(name: str, cpu: str, group: str = "", claim: str = "data") -> str:
    ann = f", annotations: {{scheduling.k8s.io/group-name: {group}}}" if group else ""
    vol = f"volumes: [{{name: d, persistentVolumeClaim: {{claimName: {claim}}}}}], " if claim else ""
    return (f"{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default{ann}}}, spec: "
            f"{{{vol}containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: {cpu}, "
            "memory: 100Mi}}}]}}")  # fmt: skip


def test_an_outcome_cached_before_the_claim_was_taken_is_not_used_after() -> None:
    """Shape X (the claim, 1 cpu) is evaluated on both nodes while the claim is free (two gangs
    that are then given up), a pod of another shape on the same claim takes it on one node, and
    a last pod of shape X asks: the node the others left untouched must not be read from the
    cache, where it still fits."""
    group = ("{apiVersion: scheduling.volcano.sh/v1beta1, kind: PodGroup, metadata: {name: %s, "
             "namespace: default}, spec: {minMember: 2}}")  # fmt: skip
    docs = [
        "{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace: default}, "
        "spec: {accessModes: [ReadWriteOncePod], volumeName: pv1}, status: {phase: Bound}}",
        "{apiVersion: v1, kind: PersistentVolume, metadata: {name: pv1}, spec: {capacity: {storage: 1Gi}}}",
        group % "g1", _pod("x1", "1", "g1"), _pod("z1", "100", "g1", claim=""),
        group % "g2", _pod("x2", "1", "g2"), _pod("z2", "100", "g2", claim=""),
        _pod("y", "2"),
        _pod("x3", "1"),
    ]  # fmt: skip
    sc = dataclasses.replace(ROWS["rwop-a-second-pod-waits"], workload="\n---\n".join(docs))
    sim = _simulation(sc, cycles=0)
    sim.run()
    snap, conf = sim.projection.snapshot(), parse_conf(sc.conf)
    cached, fresh = decide(snap, conf), decide(snap, conf, node_cache=False)
    assert bound_of(fresh) == {"default/y": "n1"}
    assert bound_of(cached) == bound_of(fresh)


def test_a_zone_labelled_volume_names_its_zone_and_the_nodes() -> None:
    """VolumeZone's refusal says which label the volume carries and what each node says."""
    u = unschedulable(ROWS["no-node-in-the-volumes-zone-or-region-waits"], "default/app")
    assert u.node_reasons == {"zA": "node(s) had no available volume zone", "zB": "node(s) had no available volume zone"}
    words = {g.reason: g.plugin for g in u.groups}
    region = ("claim data is bound to PersistentVolume pv-z1, labelled topology.kubernetes.io/region r1; "
              "node zA has topology.kubernetes.io/region=r2 (node(s) had no available volume zone)")  # fmt: skip
    zone = ("claim data is bound to PersistentVolume pv-z1, labelled topology.kubernetes.io/zone z1; "
            "node zB has topology.kubernetes.io/zone=z2 (node(s) had no available volume zone)")  # fmt: skip
    assert words == {region: "VolumeZone", zone: "VolumeZone"}, words
