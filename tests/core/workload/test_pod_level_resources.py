"""What a pod holds of its node when it names pod-level resources (`spec.resources`, on by
default since Kubernetes 1.34) or sidecars (init containers with `restartPolicy: Always`, GA in
1.33), read as kube-scheduler and the kubelet read it — at admission (the task's request) and
for another scheduler's pod on a shared node (`services.kube.pods.requests_of`) alike — and
the API server's rules for `spec.resources`, in its words."""

from __future__ import annotations

import pytest
import yaml

from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.kube.pods import requests_of
from tests.core.workload.manifests import one_task_job

REG = build_vendors()


def run(text: str) -> Workload:
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def pod(spec: str) -> str:
    return f"{{apiVersion: v1, kind: Pod, metadata: {{name: p}}, spec: {spec}}}"


def c(name: str, requests: str = "{}", limits: str = "{}", *, always: bool = False) -> str:
    policy = ", restartPolicy: Always" if always else ""
    return f"{{name: {name}, image: x, resources: {{requests: {requests}, limits: {limits}}}{policy}}}"


def held(spec: str) -> tuple[int, int]:
    """(cpu milli, memory MiB) as admission reads the pod and as a shared node's accounting
    reads the same pod bound by another scheduler — asserted to agree."""
    w = run(pod(spec))
    assert not w.rejections, [r.line() for r in w.rejections]
    t = w.jobs[0].tasks[0]
    other = requests_of(yaml.safe_load(pod(spec)))
    assert (other.get("cpu", 0), other.get("memory", 0)) == (t.cpu_milli, t.memory_mib)
    return t.cpu_milli, t.memory_mib


CASES = [
    # containers only: the sum, at least the largest init container
    ("{containers: [" + c("a", "{cpu: 1}") + ", " + c("b", "{cpu: 500m}") + "],"
     " initContainers: [" + c("i", "{cpu: 2}") + "]}", (2000, 0)),
    # a sidecar runs beside the app: added to the sum, and to every init container after it
    ("{initContainers: [" + c("mesh", "{cpu: 500m, memory: 128Mi}", always=True) + ", "
     + c("warm", "{cpu: 3}") + "], containers: [" + c("a", "{cpu: 1, memory: 1Gi}") + "]}", (3500, 1152)),
    # an init container before the sidecar does not run beside it
    ("{initContainers: [" + c("warm", "{cpu: 3}") + ", " + c("mesh", "{cpu: 500m}", always=True) + "],"
     " containers: [" + c("a", "{cpu: 1}") + "]}", (3000, 0)),
    # pod-level requests replace the containers' sum for cpu and memory
    ("{resources: {requests: {cpu: 16, memory: 64Gi}}, containers: [" + c("a", "{cpu: 1}") + ", "
     + c("b") + "]}", (16000, 65536)),
    # a pod-level limit alone stands for the request where no container asks the resource ...
    ("{resources: {limits: {cpu: 8, memory: 4Gi}}, containers: [" + c("a", "{memory: 1Gi}") + "]}",
     (8000, 1024)),
    # ... and pod-level cpu only leaves memory to the containers
    ("{resources: {requests: {cpu: 4}}, containers: [" + c("a", "{cpu: 1, memory: 2Gi}") + "]}", (4000, 2048)),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "expected"), CASES)
def test_what_a_pod_holds_of_its_node(spec: str, expected: tuple[int, int]) -> None:
    assert held(spec) == expected


def test_overhead_is_added_to_pod_level_requests() -> None:
    spec = ("{overhead: {cpu: 250m, memory: 120Mi}, resources: {requests: {cpu: 2, memory: 1Gi}},"
            " containers: [" + c("a", "{cpu: 1}") + "]}")  # fmt: skip
    assert held(spec) == (2250, 1144)


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        ("{resources: {requests: {cpu: 1}}, containers: [" + c("a", "{cpu: 1500m}") + "]}",
         'spec.resources.requests[cpu]: Invalid value: "1": must be greater than or equal to aggregate '
         "container requests of 1500m"),
        ("{resources: {requests: {memory: 1Gi}}, initContainers: [" + c("m", "{memory: 512Mi}", always=True)
         + "], containers: [" + c("a", "{memory: 1Gi}") + "]}",
         'spec.resources.requests[memory]: Invalid value: "1Gi": must be greater than or equal to aggregate '
         "container requests of 1536Mi"),
        ("{resources: {requests: {cpu: 4}, limits: {cpu: 2}}, containers: [" + c("a") + "]}",
         'spec.resources.requests[cpu]: Invalid value: "4": must be less than or equal to cpu limit of 2'),
        ("{resources: {limits: {cpu: 2}}, containers: [" + c("a", "{}", "{cpu: 3}") + "]}",
         'spec.containers[0].resources.limits[cpu]: Invalid value: "3": must be less than or equal to pod '
         "limits of 2"),
        ("{resources: {requests: {nvidia.com/gpu: 1}}, containers: [" + c("a") + "]}",
         'spec.resources.requests[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu": supported values: '
         '"cpu", "hugepages-<size>", "memory"'),
    ],
)  # fmt: skip
def test_the_api_servers_rules_for_pod_level_resources(spec: str, line: str) -> None:
    w = run(pod(spec))
    assert not w.jobs
    assert [r.line() for r in w.rejections] == [line]


def test_a_volcano_jobs_template_is_held_to_the_same_rules() -> None:
    """Volcano's job webhook checks pod-level resources of each task's template too."""
    text = one_task_job('        resources: {requests: {cpu: "2"}}\n'
                        '        containers: [{name: c, image: x, resources: {requests: {cpu: "4"}}}]', replicas=2)
    [r] = run(text).rejections
    assert r.path == "spec.tasks[0].template.spec.resources.requests[cpu]"
    ok = run(text.replace('cpu: "2"}}', 'cpu: "6"}}'))
    assert not ok.rejections and ok.jobs[0].tasks[0].cpu_milli == 6000


def test_an_init_containers_limit_above_the_pods_is_the_api_servers_business_not_a_refusal() -> None:
    """The API server holds only the app containers' limits to the pod-level limit."""
    spec = ("{resources: {limits: {cpu: 2}}, initContainers: [" + c("warm", "{cpu: 1}", "{cpu: 4}") + "],"
            " containers: [" + c("a", "{cpu: 1}", "{cpu: 2}") + "]}")  # fmt: skip
    assert not run(pod(spec)).rejections
