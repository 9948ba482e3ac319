"""explain's fix for a pod held off a tainted node that already matches it: a pod whose
nodeSelector matches only a tainted node was told to label another node ("label a node zone=c"
of a cluster whose n3 has zone=c); a spread whose emptiest domain counts only through
`nodeTaintsPolicy: Ignore` (kube's default when unset: tainted nodes count) was told to find
room in another domain — the one the pod can never enter. Now the toleration (or the taint's
removal), and nodeTaintsPolicy: Honor (a review of podspec)."""

from __future__ import annotations

from services.core.scheduling.config import DEFAULT_CONF
from tests.core.scheduling.test_preemption_explain import verdicts

TAINTED = {"nodes": [
    {"name": "n1", "cpu": 4, "memory": "8Gi", "labels": {"zone": "a"}},
    {"name": "n2", "cpu": 4, "memory": "8Gi", "labels": {"zone": "b"}},
    {"name": "n3", "cpu": 4, "memory": "8Gi", "labels": {"zone": "c"},
     "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
]}  # fmt: skip


def test_a_selector_matching_only_a_tainted_node_is_told_the_toleration() -> None:
    docs = """
apiVersion: v1
kind: Pod
metadata: {name: taintwait}
spec:
  nodeSelector: {zone: c}
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
    v = verdicts(DEFAULT_CONF, docs, TAINTED)["taintwait"]
    assert v.unblock == (
        "tolerate the taint dedicated=gpu:NoSchedule of n3 (it matches the pod's nodeSelector): add to the "
        "pod's tolerations {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}; or remove it "
        "(kubectl taint node n3 dedicated=gpu:NoSchedule-)"
    )


ZONES = {"nodes": [
    {"name": "a1", "cpu": 8, "memory": "16Gi", "labels": {"topology.kubernetes.io/zone": "a"}},
    {"name": "a2", "cpu": 8, "memory": "16Gi", "labels": {"topology.kubernetes.io/zone": "a"}},
    {"name": "b1", "cpu": 8, "memory": "16Gi", "labels": {"topology.kubernetes.io/zone": "b"}},
    {"name": "c1", "cpu": 8, "memory": "16Gi", "labels": {"topology.kubernetes.io/zone": "c"},
     "taints": ["dedicated=x:NoSchedule"]},
]}  # fmt: skip


def spread_pods(policy: str) -> str:
    return "\n---\n".join(f"""
apiVersion: v1
kind: Pod
metadata: {{name: ign-{i}, labels: {{app: ign}}}}
spec:
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
  topologySpreadConstraints:
  - {{labelSelector: {{matchLabels: {{app: ign}}}}, maxSkew: 1, topologyKey: topology.kubernetes.io/zone,
      whenUnsatisfiable: DoNotSchedule{policy}}}
""" for i in range(3))  # fmt: skip


def test_a_spread_held_by_a_tainted_domain_counted_under_ignore_is_told_honor() -> None:
    v = verdicts(DEFAULT_CONF, spread_pods(""), ZONES)["ign-2"]
    assert v.unblock == (
        "topology.kubernetes.io/zone=a would be 2 pods over the emptiest domain, topology.kubernetes.io/zone=c, "
        "which counts only because the constraint's nodeTaintsPolicy is Ignore (the default when unset) though "
        "the pod tolerates none of its nodes' taints (c1: dedicated=x:NoSchedule): set nodeTaintsPolicy: Honor "
        "on the constraint, or tolerate the taint"
    )
    # with Honor the tainted zone does not count, and the three pods spread over a and b
    assert "ign-2" not in verdicts(DEFAULT_CONF, spread_pods(", nodeTaintsPolicy: Honor"), ZONES)
