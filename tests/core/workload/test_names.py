"""Names: every object name as the API server (and Volcano's job webhook) validates it."""

from __future__ import annotations

import pytest

from services.core.devices import build_vendors
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.core.workload.names import dns1123_label, dns1123_subdomain, qualified_name

SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def pod(name: str, namespace: str = "default", resources: str = '{limits: {cpu: "1"}}') -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: "{name}", namespace: "{namespace}"}}
spec:
  containers: [{{name: c, image: busybox, resources: {resources}}}]
"""


def reasons(text: str) -> list[str]:
    reg = build_vendors()
    workload = admit(load_documents(text), hami_parser(reg), reg.resource_names())
    return [f"{r.path}: {r.rule}" for r in workload.rejections]


def test_the_texts_are_apimachinerys() -> None:
    assert dns1123_subdomain("a/b") == [SUBDOMAIN_RULE]
    assert dns1123_subdomain("x" * 254) == ["must be no more than 253 characters"]
    assert dns1123_label("a.b") == ["must not contain dots"]
    assert dns1123_label("A") == [LABEL_RULE]
    assert dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert qualified_name("j-" + "t" * 62) == ["name part must be no more than 63 characters"]
    for ok in ("a", "a-b.c", "0-x", "x" * 63):
        assert dns1123_label(ok) == [] or "." in ok
        assert dns1123_subdomain(ok) == []


def test_a_pod_named_a_slash_b_is_refused_in_the_api_servers_words() -> None:
    assert reasons(pod("a/b")) == [f'metadata.name: Invalid value: "a/b": {SUBDOMAIN_RULE}']


@pytest.mark.parametrize("name", ["Upper", "-lead", "trail-", "a_b", "x" * 254, "a..b"])
def test_bad_pod_names_are_refused(name: str) -> None:
    got = reasons(pod(name))
    assert got and all(r.startswith("metadata.name: Invalid value:") for r in got), got


def test_namespace_is_a_label() -> None:
    assert reasons(pod("p", "a.b")) == ['metadata.namespace: Invalid value: "a.b": must not contain dots']
    got = reasons(pod("p", "n" * 4100))
    assert got[0].startswith('metadata.namespace: Invalid value: "nnnn')
    assert got[0].endswith("(4100 characters): must be no more than 63 characters")


def test_a_name_is_required() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\nspec: {containers: [{name: c, image: i}]}"
    assert reasons(text) == ["metadata.name: Required value: name or generateName is required"]


@pytest.mark.parametrize(
    ("kind", "api"),
    [("Queue", "scheduling.volcano.sh/v1beta1"), ("PodGroup", "scheduling.volcano.sh/v1beta1"),
     ("PriorityClass", "scheduling.k8s.io/v1")],
)  # fmt: skip
def test_every_kind_checks_its_name(kind: str, api: str) -> None:
    extra = "value: 1\n" if kind == "PriorityClass" else ""
    got = reasons(f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: q_1}}\n{extra}")
    assert got == [f'metadata.name: Invalid value: "q_1": {SUBDOMAIN_RULE}']


def job(name: str, task: str, replicas: int = 1) -> str:
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: "{name}"}}
spec:
  tasks:
    - name: "{task}"
      replicas: {replicas}
      template:
        spec:
          containers: [{{name: c, image: busybox}}]
"""


def test_volcano_task_names_are_labels_and_pod_names_qualified() -> None:
    assert reasons(job("j", "Work.er")) == [f"spec.tasks[0].name: [{LABEL_RULE}]"]
    long_job = "j" * 60
    got = reasons(job(long_job, "w", replicas=10))  # the pod `<job>-w-9` is 64 characters
    assert got == [f"spec.tasks[0].name: create pod with name {long_job}-w-9 validate failed "
                   "[name part must be no more than 63 characters]"]  # fmt: skip
    got = reasons(job("j" * 64, "w"))
    assert got[0] == (f"metadata.name: Invalid value: \"{'j' * 64}\": create job with name "
                      f"{'j' * 64} validate failed [name part must be no more than 63 characters]")  # fmt: skip
