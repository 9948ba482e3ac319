"""The pure halves of the edge: HAMi's annotation codecs, Node → registration, Pod → binding
annotations, and the "why it waits" line. Facts from hami.md §2.5, §3.1–3.2."""

from __future__ import annotations

import json

import pytest

from contracts import hami
from contracts.devices import SliceSpec
from contracts.events import SliceAssignment, TaskPlacement
from contracts.workloads import DeviceRequest, JobSpec, TaskSpec
from services.core.devices.catalogue import default_catalogue
from services.core.scheduling import podreasons as reasons
from services.kube import nodes, pods
from tests.kube.workload import ascend_register, nvidia_register_csv

NOW = 1_796_000_000.0


def test_register_json_and_both_csv_forms() -> None:
    json_devs = hami.decode_register(hami.NVIDIA_REGISTER, json.dumps([
        {"id": "GPU-a", "count": 10, "devmem": 32768, "devcore": 100,
         "type": "NVIDIA-Tesla V100-PCIE-32GB", "health": True, "mode": "hami-core"},
        {"id": "GPU-b", "index": 1, "numa": 1, "count": 10, "devmem": 32768, "devcore": 100,
         "type": "NVIDIA-Tesla V100-PCIE-32GB"}]))  # fmt: skip
    # Go's omitempty: index/numa 0 and health false are absent
    assert [(d.uuid, d.index, d.numa, d.health) for d in json_devs] == [
        ("GPU-a", 0, 0, True), ("GPU-b", 1, 1, False)]  # fmt: skip
    seven = hami.decode_register("k", "GPU-a,10,32768,100,NVIDIA-T4,0,true:GPU-b,10,32768,100,NVIDIA-T4,1,false:")
    assert [(d.uuid, d.index, d.numa, d.health, d.mode) for d in seven] == [
        ("GPU-a", 0, 0, True, ""), ("GPU-b", 1, 1, False, "")]  # fmt: skip
    nine = hami.decode_register("k", nvidia_register_csv("gpu-1"))
    assert [(d.index, d.mode, d.devmem) for d in nine] == [(0, "hami-core", 40960), (1, "hami-core", 40960)]


@pytest.mark.parametrize("value, words", [
    ("GPU-a,10,32768", "3 fields, expected 7 or 9"),
    ('[{"index": 1}]', "needs an `id`"),
    ('[{"id": "x", "devmem": "lots"}]', "devmem is 'lots', not a number"),
    ("[{", "not JSON"),
])  # fmt: skip
def test_register_errors_name_the_key_and_the_rule(value: str, words: str) -> None:
    with pytest.raises(hami.CodecError, match=r"hami\.io/node-nvidia-register") as err:
        hami.decode_register(hami.NVIDIA_REGISTER, value)
    assert words in str(err.value)


def test_pod_devices_round_trip_keeps_empty_container_slots() -> None:
    text = "GPU-0fc3,NVIDIA,3000,0:;GPU-0fc3,NVIDIA,5000,0:;"  # hami.md §3.2's example
    slots = hami.decode_pod_devices("k", text)
    assert [[(d.uuid, d.memory) for d in s] for s in slots] == [[("GPU-0fc3", 3000)], [("GPU-0fc3", 5000)]]
    assert hami.encode_pod_devices(slots) == text
    assert hami.encode_pod_devices([[], slots[0]]) == ";GPU-0fc3,NVIDIA,3000,0:;"
    assert hami.decode_pod_devices("k", ";GPU-0fc3,NVIDIA,3000,0:;")[0] == []


def test_runtime_info_as_hami_writes_it() -> None:
    d = [hami.PodDevice("device-0", "Ascend910B3", 8738, 1), hami.PodDevice("u-1", "Ascend910B3", 8192, 0)]
    assert json.loads(hami.encode_runtime_info(d, {"device-0": "vir08"})) == [
        {"UUID": "device-0", "temp": "vir08", "memory": 8738, "core": 1},
        {"UUID": "u-1", "memory": 8192}]  # fmt: skip


def _node(name: str, annotations: dict[str, str], allocatable: dict[str, str] | None = None,
          ready: str = "True", **spec: object) -> dict:  # fmt: skip
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": annotations},
            "spec": spec, "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110", **(allocatable or {})},
                                     "conditions": [{"type": "Ready", "status": ready}]}}  # fmt: skip


ASCEND = {"huawei.com/Ascend910B3": "8"}


def test_template_and_hami_core_nodes() -> None:
    cat = default_catalogue()
    key = hami.ascend_register_key("Ascend910B3")
    shake = hami.ascend_handshake_key("Ascend910B3")
    a = nodes.node_view(_node("a", {key: ascend_register("a"), shake: "Reported_2026.12.01 08:00:00"}, ASCEND), cat, NOW)
    assert a.ready and a.answer_handshakes == (shake,)
    assert {(c.mode, c.cores, c.split_count, c.memory) for c in a.registered.cards} == {("template", 20, 4, 65536)}
    assert [c.network_id for c in a.registered.cards] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (a.registered.cpu_milli, a.registered.memory_mib) == (96000, 768 * 1024)
    b = nodes.node_view(_node("b", {key: ascend_register("b"), hami.VNPU_CORE: "true"}, ASCEND), cat, NOW)
    assert {(c.mode, c.cores) for c in b.registered.cards} == {("hami-core", 100)}
    assert b.registered.annotations == {hami.VNPU_CORE: "true"}  # handshakes are not kept


def test_devices_lost_as_hami_decides() -> None:
    cat = default_catalogue()
    key, shake = hami.ascend_register_key("Ascend910B3"), hami.ascend_handshake_key("Ascend910B3")
    asked = nodes.handshake_value(NOW - 61)
    gone = nodes.node_view(_node("a", {key: ascend_register("a"), shake: asked}, {"huawei.com/Ascend910B3": "0"}), cat, NOW)
    assert gone.registered.cards == ()
    recent = nodes.node_view(_node("a", {key: ascend_register("a"), shake: nodes.handshake_value(NOW - 30)},
                                   {"huawei.com/Ascend910B3": "0"}), cat, NOW)  # fmt: skip
    assert len(recent.registered.cards) == 8  # 60 s not over yet
    still = nodes.node_view(_node("a", {key: ascend_register("a"), shake: asked}, ASCEND), cat, NOW)
    assert len(still.registered.cards) == 8  # allocatable still counts the cards
    nv = nodes.node_view(_node("g", {hami.NVIDIA_REGISTER: nvidia_register_csv("g")}, {"nvidia.com/gpu": "0"}), cat, NOW)
    assert nv.registered.cards == ()  # NVIDIA (HAMi >= 2.9): allocatable count 0


def test_what_a_nodes_kubelet_serves_is_its_extended_resources_with_a_count() -> None:
    """cpu, memory, pods and hugepages are not a device plugin's; a name at 0 (its plugin gone,
    every device unhealthy) makes the kubelet refuse a pod that asks it."""
    served = {"huawei.com/Ascend910B3": "32", "huawei.com/Ascend910": "0", "example.com/fpga": "2",
              "hugepages-2Mi": "1Gi", "ephemeral-storage": "100Gi"}  # fmt: skip
    view = nodes.node_view(_node("a", {}, served), default_catalogue(), NOW)
    assert view.registered.extended == ("example.com/fpga", "huawei.com/Ascend910B3")


def test_a_vendor_plugins_count_without_registration_is_that_many_whole_cards() -> None:
    """Huawei's ascend-device-plugin (or NVIDIA's) alone: the kubelet serves 8 and 4 cards, no
    HAMi annotation describes them, so each unit is a whole card of mode `plugin` (Volcano fits
    the count against allocatable); a name of the family no request uses is a problem of the
    node; a family HAMi registers is booked from the registration alone."""
    cat = default_catalogue()
    view = nodes.node_view(_node("npu-1", {}, {"huawei.com/Ascend910": "8", "nvidia.com/gpu": "4",
                                                "huawei.com/Ascend910-2c": "2"}), cat, NOW)  # fmt: skip
    cards = view.registered.cards
    assert view.registered.extended == ("huawei.com/Ascend910", "huawei.com/Ascend910-2c", "nvidia.com/gpu")
    assert sorted({(c.resource, c.mode) for c in cards}) == [("huawei.com/Ascend910", "plugin"), ("nvidia.com/gpu", "plugin")]
    assert [c.uuid for c in cards if c.vendor == "nvidia"] == [f"npu-1/nvidia.com/gpu/{i}" for i in range(4)]
    assert sum(c.vendor == "huawei" for c in cards) == 8
    assert [p.split(" served by")[0] for p in view.problems] == ["status.allocatable.huawei.com/Ascend910-2c: 2"]
    assert "(no hami.io/node-register-<CommonWord> annotation)" in view.problems[0]
    assert "nodeAgent.devicePlugin: tessera" in view.problems[0]
    key = hami.ascend_register_key("Ascend910B3")  # HAMi's plugin registers: its cards only
    registered = nodes.node_view(_node("a", {key: ascend_register("a")}, ASCEND), cat, NOW)
    assert registered.problems == () and len(registered.registered.cards) == 8
    assert not any(c.mode == "plugin" for c in registered.registered.cards)
    unserved = nodes.node_view(_node("b", {}, {"huawei.com/Ascend910": "0"}), cat, NOW)
    assert unserved.problems == () and unserved.registered.cards == ()  # nothing served, nothing withheld


def test_cordon_not_ready_and_bad_annotations() -> None:
    cat = default_catalogue()
    view = nodes.node_view(_node("c", {hami.ascend_register_key("Ascend999"): "[]",
                                       hami.NVIDIA_REGISTER: "x,y"}, ready="False", unschedulable=True,
                                 taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]), cat, NOW)  # fmt: skip
    assert not view.ready
    assert view.registered.taints == ("gpu=yes:NoSchedule", nodes.UNSCHEDULABLE_TAINT)
    assert any("Ascend999 is not in the device catalogue" in p for p in view.problems)
    assert any("hami.io/node-nvidia-register" in p for p in view.problems)


def _card(uuid: str, vendor: str = "huawei", type_: str = "Ascend910B3") -> object:
    from contracts.devices import CardSpec

    return CardSpec(uuid=uuid, node="n", index=0, type=type_, vendor=vendor, memory=65536, cores=20)


def test_binding_annotations_one_slot_per_container_init_first() -> None:
    req = DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, memory=8192, container=1)
    task = TaskSpec(name="t", devices=(req,), containers=2, init_containers=1)
    placement = TaskPlacement(task="p", node="n", slices=(SliceAssignment(
        card="u1", node="n", slice=SliceSpec(kind="template", memory=8192, cores=2, template="vir02")),))  # fmt: skip
    out = pods.binding_annotations(placement, task, {"u1": _card("u1")}, NOW)
    assert out[hami.ascend_to_allocate_key("Ascend910B3")] == ";;u1,Ascend910B3,8192,2:;"
    assert out[hami.ascend_allocated_key("Ascend910B3")] == out[hami.ascend_to_allocate_key("Ascend910B3")]
    assert json.loads(out["huawei.com/Ascend910B3"]) == [{"UUID": "u1", "temp": "vir02", "memory": 8192, "core": 2}]
    assert (out[hami.VGPU_NODE], out[hami.BIND_PHASE], out[hami.BIND_TIME]) == ("n", "allocating", str(int(NOW)))
    assert out[hami.PREDICATE_TIME] == str(int(NOW))
    gpu = TaskPlacement(task="g", node="n", slices=(SliceAssignment(
        card="GPU-1", node="n", slice=SliceSpec(kind="soft", memory=10000, cores=30)),))  # fmt: skip
    out = pods.binding_annotations(gpu, None, {"GPU-1": _card("GPU-1", "nvidia", "NVIDIA-A100")}, NOW)
    assert out[hami.NVIDIA_TO_ALLOCATE] == "GPU-1,NVIDIA,10000,30:;" and hami.PREDICATE_TIME not in out
    assert pods.binding_annotations(TaskPlacement(task="cpu", node="n"), None, {}, NOW) == {}


def test_why_a_pod_waits_in_words() -> None:
    ask = DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, memory=8192)
    spec = JobSpec(namespace="d", name="j", tasks=(TaskSpec(name="t", devices=(ask,)),))
    line = reasons.nodes_line({
        "a": "1/8 CardInsufficientMemory", "b": "8/8 CardInsufficientMemory",
        "c": "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }",
        "d": "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }"}, 4, spec)  # fmt: skip
    # kube-scheduler's words where it has them (a cordon: NodeUnschedulable's, also from an older
    # log's taint form); HAMi's codes in what the pod asked, equal counts in phrase order
    assert line == "0/4 nodes are available: 2 have no Ascend910B3 card with 8192 MB free, 2 node(s) were unschedulable."
    assert reasons.phrase("Insufficient cpu", spec) == "Insufficient cpu"
    assert reasons.phrase("node(s) had untolerated taint {dedicated: infer}", spec) == (
        "node(s) had untolerated taint {dedicated: infer}")
    assert reasons.phrase("node(s) didn't match Pod's node affinity/selector", spec) == (
        "node(s) didn't match Pod's node affinity/selector")
    gang = reasons.message("1/2 tasks in gang unschedulable: 0/1 nodes are unavailable: 1 8/8 NodeInsufficientDevice.",
                           {"a": "8/8 NodeInsufficientDevice"}, 1, spec)  # fmt: skip
    assert gang == "1/2 tasks in gang unschedulable: 0/1 nodes are available: 1 has no free Ascend910B3 card."
    assert reasons.message("queue q is Closed", {}, 3, spec) == "queue q is Closed"
    # a job refused before any node was tried says the rule in words when the scheduler gave them
    why = "queue train-queue: Ascend910B3 1 requested, capability 8, allocated 8 (capacity)"
    assert reasons.message("queue resource quota insufficient", {}, 3, spec, why) == why


def test_a_job_arrives_when_its_object_was_made() -> None:
    """Volcano's sla plugin counts a job's waiting time from its creationTimestamp: the object's
    creation is the job's arrival (`tessera.io/arrive-at`), unless the object names one; a pod
    of a PodGroup is not a job (its PodGroup arrives)."""
    from services.core.workload.admission import ARRIVE_AT
    from services.kube import volcano

    made = {"name": "j", "namespace": "default", "uid": "u1", "creationTimestamp": "2026-12-06T08:00:00Z"}
    job = volcano.manifest({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": made, "spec": {}})
    assert job["metadata"]["annotations"][ARRIVE_AT] == "1796544000"
    named = {**made, "annotations": {ARRIVE_AT: "5"}}
    assert volcano.manifest({"kind": "PodGroup", "metadata": named})["metadata"]["annotations"][ARRIVE_AT] == "5"
    queue = volcano.manifest({"kind": "Queue", "metadata": {"name": "q", "creationTimestamp": made["creationTimestamp"]}})
    assert ARRIVE_AT not in (queue["metadata"].get("annotations") or {})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": made, "spec": {"containers": []}}
    assert pods.manifest(pod)["metadata"]["annotations"][ARRIVE_AT] == "1796544000"
    member = {**pod, "metadata": {**made, "annotations": {"scheduling.k8s.io/group-name": "pg"}}}
    assert ARRIVE_AT not in pods.manifest(member)["metadata"]["annotations"]
    odd = {**pod, "metadata": {**made, "creationTimestamp": "yesterday"}}
    assert ARRIVE_AT not in pods.manifest(odd)["metadata"]["annotations"]


def test_a_job_admitted_before_arrivals_were_read_is_not_refused_when_judged_again() -> None:
    """After an upgrade, admission judges each live Job again: its manifest now carries its
    arrival, which must not read as a change of its pod template (Volcano's update rule) — the
    job's arrival is not copied into its pods' annotations."""
    from services.core.devices import build_vendors
    from services.core.workload import admit
    from services.core.workload.admission import ARRIVE_AT
    from services.core.workload.devicerequests import hami_parser
    from services.core.workload.jobupdate import judge_update
    from services.kube import volcano

    reg = build_vendors()
    obj = {"apiVersion": volcano.BATCH, "kind": "Job",
           "metadata": {"name": "j", "namespace": "default", "uid": "u1", "creationTimestamp": "2026-12-06T08:00:00Z",
                        "annotations": {"team": "nlp"}},
           "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1, "template": {
               "spec": {"containers": [{"name": "c", "image": "x"}]}}}]}}  # fmt: skip
    now = volcano.manifest(obj)
    before = {**now, "metadata": {**now["metadata"], "annotations": {
        k: v for k, v in now["metadata"]["annotations"].items() if k != ARRIVE_AT}}}  # fmt: skip
    (old,) = admit([before], hami_parser(reg), reg.resource_names()).jobs
    (new,) = admit([now], hami_parser(reg), reg.resource_names()).jobs
    change = judge_update(old, new)
    assert change.refusals == () and change.spec is not None and change.spec.arrive_at == 1796544000.0
    assert new.tasks[0].annotations.get("team") == "nlp" and ARRIVE_AT not in new.tasks[0].annotations


def test_a_pod_the_api_server_merged_match_label_keys_into_is_admitted_as_it_is_stored() -> None:
    """From 1.33 the API server writes a term's matchLabelKeys into its selector when it makes
    the pod (a Deployment's pod-template-hash); read back through the cluster, that pod was
    refused as naming the key twice, and its merge must not be made again."""
    from contracts.workloads import LabelRequirement
    from services.core.devices import build_vendors
    from services.core.workload import admit
    from services.core.workload.devicerequests import hami_parser

    reg = build_vendors()
    term = {"labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "pod-template-hash", "operator": "In", "values": ["abc"]}]},
            "matchLabelKeys": ["pod-template-hash"], "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": term["labelSelector"], "matchLabelKeys": ["pod-template-hash"]}  # fmt: skip
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web-abc-1", "namespace": "default", "uid": "u9", "resourceVersion": "7",
                        "labels": {"app": "web", "pod-template-hash": "abc"}},
           "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}],
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
                    "topologySpreadConstraints": [spread]},
           "status": {"phase": "Pending"}}  # fmt: skip
    w = admit([pods.manifest(obj)], hami_parser(reg), reg.resource_names())
    assert not w.rejections, [r.line() for r in w.rejections]
    task = w.jobs[0].tasks[0]
    stored = (LabelRequirement(key="app", operator="In", values=("web",)),
              LabelRequirement(key="pod-template-hash", operator="In", values=("abc",)))  # fmt: skip
    assert task.pod_affinity is not None and task.pod_affinity.anti_affinity[0].selector == stored
    assert task.spread[0].selector == stored
    assert pods.other_pods(obj).pod_affinity is not None
    assert pods.other_pods(obj).pod_affinity.anti_affinity[0].selector == stored


def test_an_init_container_the_app_slices_hold_gets_its_own_slot_on_that_card() -> None:
    """An init container asking a card the app container's slice holds books nothing more,
    but the kubelet calls the device plugin's Allocate for it, and HAMi's plugin takes the first
    slot with devices: left empty, the init container took the app's slot and the app's own
    Allocate failed ("no devices left to allocate"). Now it names the same card in its slot."""
    from services.core.devices import build_vendors
    from services.core.workload.admission import admit
    from services.core.workload.devicerequests import hami_parser

    reg = build_vendors()
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
           "spec": {"schedulerName": "volcano",
                    "initContainers": [{"name": "warm", "image": "x", "resources": {
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}}}],
                    "containers": [{"name": "app", "image": "x", "resources": {
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}}}]}}  # fmt: skip
    (job,) = admit([doc], hami_parser(reg), reg.resource_names()).jobs
    task = job.tasks[0]
    assert [(d.container, d.memory) for d in task.devices] == [(0, 4000)]  # booked: the app's slice alone
    assert [(d.container, d.memory) for d in task.init_devices] == [(0, 2000)]
    placement = TaskPlacement(task="p", node="n", slices=(SliceAssignment(
        card="GPU-1", node="n", slice=SliceSpec(kind="soft", memory=4000, cores=0)),))  # fmt: skip
    out = pods.binding_annotations(placement, task, {"GPU-1": _card("GPU-1", "nvidia", "NVIDIA-A100")}, NOW)
    assert out[hami.NVIDIA_TO_ALLOCATE] == "GPU-1,NVIDIA,2000,0:;GPU-1,NVIDIA,4000,0:;"


def test_other_schedulers_pods_hold_the_host_ports_kube_scheduler_counts() -> None:
    """kube-scheduler's GetHostPorts: app containers and restartPolicy-Always (sidecar) init
    containers; a plain init container has ended before the pod runs. hostNetwork publishes
    the containerPort; protocol and hostIP take the API server's defaults."""
    from contracts.workloads import HostPort
    from services.kube.pods import other_pods

    pod = {"metadata": {"name": "p", "namespace": "kube-system"}, "spec": {
        "hostNetwork": True,
        "containers": [{"name": "c", "ports": [{"containerPort": 9100}, {"containerPort": 53, "protocol": "UDP",
                                                                           "hostIP": "10.0.0.1"}]}],
        "initContainers": [{"name": "mesh", "restartPolicy": "Always", "ports": [{"containerPort": 15001}]},
                           {"name": "setup", "ports": [{"containerPort": 8080}]}]}}  # fmt: skip
    assert other_pods(pod).host_ports == (
        HostPort(port=9100), HostPort(port=15001), HostPort(port=53, protocol="UDP", ip="10.0.0.1"))
    assert other_pods({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "ports": [
        {"containerPort": 80}]}]}}).host_ports == ()  # no hostPort: nothing held on the node


def test_a_registration_names_the_node_objects_uid() -> None:
    """A node deleted and made again under its name is told apart by its uid (`get nodes` AGE)."""
    obj = _node("a", {})
    obj["metadata"]["uid"] = "0b6c-uid"
    assert nodes.node_view(obj, default_catalogue(), NOW).registered.uid == "0b6c-uid"
