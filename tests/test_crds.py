"""Volcano's CRDs in the chart (charts/tessera/files/crds, issue 14 item 4), checked offline.

Each schema must be *structural* as the API server requires of apiextensions.k8s.io/v1 (every
node typed unless it is int-or-string or keeps unknown fields; no `properties` beside
`additionalProperties`; anyOf only in the int-or-string form; defaults valid where they stand),
declare Volcano's names, scopes, short names, status subresource and printer columns, and accept
the article's Queue and Job (examples/article.yaml) with Volcano's defaults — while refusing, by
field path, what `kubectl apply` (strict field validation) refuses. The schemas are checked with
`jsonschema` (a dependency of kubernetes-validate) after making unknown fields errors, as the API
server's strict field validation does. The same objects against a real API server:
tests/kube/test_crds_server.py.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "charts" / "tessera" / "files" / "crds"
ARTICLE = ROOT / "examples" / "article.yaml"
Schema = dict[str, Any]
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def crds() -> dict[str, dict[str, Any]]:
    """kind → CRD, as the chart ships them."""
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        out[crd["spec"]["names"]["kind"]] = crd
    return out


def schema_of(kind: str) -> Schema:
    (version,) = crds()[kind]["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def nodes(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


def structural_errors(schema: Schema) -> list[str]:
    """What the API server's structural-schema check would refuse (its documented rules)."""
    errors = []
    for path, node in nodes(schema):
        free = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        if not node.get("type") and not free:
            errors.append(f"{path or '<root>'}: no type")
        if "properties" in node and "additionalProperties" in node:
            errors.append(f"{path}: properties beside additionalProperties")
        if "anyOf" in node and (node["anyOf"] != INT_OR_STRING or not node.get("x-kubernetes-int-or-string")):
            errors.append(f"{path}: anyOf other than int-or-string")
        for banned in ("$ref", "oneOf", "allOf", "not", "nullable"):
            if banned in node:
                errors.append(f"{path}: {banned}")
        if node.get("additionalProperties") is False:
            errors.append(f"{path}: additionalProperties false (structural schemas prune instead)")
        if "default" in node:
            try:
                jsonschema.validate(node["default"], _strict(node))
            except jsonschema.ValidationError as exc:
                errors.append(f"{path}: default {node['default']!r} is invalid: {exc.message}")
    if set(schema["properties"]["metadata"]) - {"type"}:
        errors.append(".metadata: may only be typed")
    return errors


def _strict(schema: Schema) -> Schema:
    """The schema with unknown fields as errors (strict field validation)."""
    out = copy.deepcopy(schema)
    for _, node in nodes(out):
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
    return out


def with_defaults(schema: Schema, obj: Any) -> Any:
    """What the API server stores: missing fields with a default get it, recursively."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        out = {k: with_defaults(props.get(k) or schema.get("additionalProperties") or {}, v) for k, v in obj.items()}
        for name, sub in props.items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
        return out
    if isinstance(obj, list):
        return [with_defaults(schema.get("items") or {}, v) for v in obj]
    return obj


def errors(obj: dict[str, Any]) -> list[str]:
    """Every violation, as `spec.weight: 0 is less than the minimum of 1`."""
    validator = jsonschema.Draft7Validator(_strict(schema_of(obj["kind"])))
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj))


def article(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all(ARTICLE.read_text()) if d and d["kind"] == kind]
    return doc


def test_the_seven_kinds_are_there_with_volcanos_groups_scopes_and_short_names() -> None:
    got = {kind: (c["spec"]["group"], c["spec"]["scope"], c["spec"]["versions"][0]["name"],
                  c["spec"]["names"].get("shortNames", [])) for kind, c in crds().items()}  # fmt: skip
    assert got == {
        "Queue": ("scheduling.volcano.sh", "Cluster", "v1beta1", ["q", "queue-v1beta1"]),
        "PodGroup": ("scheduling.volcano.sh", "Namespaced", "v1beta1", ["pg", "podgroup-v1beta1"]),
        "Job": ("batch.volcano.sh", "Namespaced", "v1alpha1", ["vcjob", "vj"]),
        "Command": ("bus.volcano.sh", "Namespaced", "v1alpha1", []),
        "HyperNode": ("topology.volcano.sh", "Cluster", "v1alpha1", ["hn"]),
        "JobFlow": ("flow.volcano.sh", "Namespaced", "v1alpha1", ["jf"]),
        "JobTemplate": ("flow.volcano.sh", "Namespaced", "v1alpha1", ["jt"]),
    }
    for kind, crd in crds().items():
        assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
        (version,) = crd["spec"]["versions"]
        assert version["served"] and version["storage"]
        # as Volcano's: a status subresource on Queue and Job; a PodGroup's status is written
        # with the object (Volcano's scheduler updates it so), a Command has none
        assert ("status" in (version.get("subresources") or {})) is (
            kind in ("Queue", "Job", "HyperNode", "JobFlow", "JobTemplate")), kind


@pytest.mark.parametrize("kind", ["Queue", "PodGroup", "Job", "Command", "HyperNode", "JobFlow", "JobTemplate"])
def test_every_schema_is_structural(kind: str) -> None:
    assert structural_errors(schema_of(kind)) == []


def test_the_structural_check_can_fail() -> None:
    broken = copy.deepcopy(schema_of("Queue"))
    del broken["properties"]["spec"]["properties"]["weight"]["type"]
    broken["properties"]["spec"]["properties"]["priority"]["default"] = -1
    assert sorted(structural_errors(broken)) == [
        ".spec.priority: default -1 is invalid: -1 is less than the minimum of 0", ".spec.weight: no type"]


def _field(schema: Schema, json_path: str) -> Schema | None:
    node: Schema | None = schema
    for name in json_path.lstrip(".").split("."):
        node = (node or {}).get("properties", {}).get(name)
    return node


def test_printer_columns_are_volcanos_and_name_fields_of_the_schema() -> None:
    columns = {kind: [(c["name"], c["jsonPath"]) for c in crd["spec"]["versions"][0].get("additionalPrinterColumns", [])]
               for kind, crd in crds().items()}  # fmt: skip
    assert columns["Queue"] == [("PARENT", ".spec.parent")]
    assert columns["PodGroup"] == [("STATUS", ".status.phase"), ("minMember", ".spec.minMember"),
                                   ("RUNNINGS", ".status.running"), ("AGE", ".metadata.creationTimestamp"),
                                   ("QUEUE", ".spec.queue")]  # fmt: skip
    assert columns["Job"] == [("STATUS", ".status.state.phase"), ("minAvailable", ".status.minAvailable"),
                              ("RUNNINGS", ".status.running"), ("AGE", ".metadata.creationTimestamp"),
                              ("QUEUE", ".spec.queue")]  # fmt: skip
    assert columns["HyperNode"] == [("Tier", ".spec.tier"), ("TierName", ".spec.tierName"),
                                    ("NodeCount", ".status.nodeCount"), ("Age", ".metadata.creationTimestamp")]  # fmt: skip
    assert columns["JobFlow"] == [("Status", ".status.state.phase"), ("Age", ".metadata.creationTimestamp")]
    for kind, cols in columns.items():
        for _, path in cols:
            if not path.startswith(".metadata"):
                assert _field(schema_of(kind), path) is not None, (kind, path)


def test_every_field_of_the_tables_is_typed() -> None:
    """volcano.md §1: the spec and status fields the controllers and scheduler read or write."""
    want = {
        "Queue": ["spec.weight", "spec.capability", "spec.reclaimable", "spec.extendClusters", "spec.guarantee.resource",
                  "spec.affinity.nodeGroupAffinity", "spec.type", "spec.parent", "spec.deserved", "spec.priority",
                  "spec.dequeueStrategy", "status.state", "status.unknown", "status.pending", "status.running",
                  "status.inqueue", "status.completed", "status.reservation.nodes", "status.allocated"],
        "PodGroup": ["spec.minMember", "spec.minTaskMember", "spec.queue", "spec.priorityClassName",
                     "spec.minResources", "spec.networkTopology.mode", "spec.subGroupPolicy", "status.phase",
                     "status.conditions", "status.running", "status.succeeded", "status.failed"],
        "Job": ["spec.schedulerName", "spec.minAvailable", "spec.volumes", "spec.tasks", "spec.policies",
                "spec.plugins", "spec.runningEstimate", "spec.queue", "spec.maxRetry", "spec.ttlSecondsAfterFinished",
                "spec.priorityClassName", "spec.minSuccess", "spec.networkTopology", "status.state.phase",
                "status.retryCount", "status.minAvailable", "status.pending", "status.running", "status.succeeded",
                "status.failed", "status.terminating", "status.unknown", "status.taskStatusCount"],
        "Command": ["action", "target.uid", "target.kind", "target.name", "reason", "message"],
        "HyperNode": ["spec.tier", "spec.tierName", "spec.members", "status.nodeCount", "status.conditions"],
        "JobFlow": ["spec.flows", "spec.jobRetainPolicy", "status.pendingJobs", "status.runningJobs",
                    "status.completedJobs", "status.failedJobs", "status.terminatedJobs", "status.unKnowJobs",
                    "status.jobStatusList", "status.conditions", "status.state.phase"],
        "JobTemplate": ["spec", "status.jobDependsOnList"],
    }  # fmt: skip
    for kind, fields in want.items():
        for f in fields:
            node = _field(schema_of(kind), f)
            assert node is not None and node.get("type"), (kind, f)
    task = schema_of("Job")["properties"]["spec"]["properties"]["tasks"]["items"]["properties"]
    assert set(task) == {"name", "replicas", "minAvailable", "template", "policies", "topologyPolicy",
                         "maxRetry", "dependsOn", "partitionPolicy"}  # fmt: skip


def test_the_articles_queue_and_job_validate_and_get_volcanos_defaults() -> None:
    queue, job = article("Queue"), article("Job")
    assert errors(queue) == [] and errors(job) == []
    stored = with_defaults(schema_of("Queue"), queue)
    assert stored["spec"]["weight"] == 1 and stored["spec"]["dequeueStrategy"] == "traverse"
    stored = with_defaults(schema_of("Job"), job)
    assert (stored["spec"]["maxRetry"], stored["spec"]["queue"]) == (3, "train-queue")
    bare = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"minMember": 2}}  # fmt: skip
    assert errors(bare) == [] and with_defaults(schema_of("PodGroup"), bare)["spec"]["queue"] == "default"
    assert with_defaults(schema_of("Job"), {"spec": {}})["spec"]["queue"] == "default"


def test_what_kubectl_would_refuse_is_refused_by_field_path() -> None:
    seed = article("Queue")
    seed["spec"]["policy"] = "besteffort"  # the article's own Queue has it: not a Volcano field
    assert errors(seed) == ["spec: Additional properties are not allowed ('policy' was unexpected)"]
    seed = article("Queue")
    seed["spec"]["weight"] = 0
    assert errors(seed) == ["spec.weight: 0 is less than the minimum of 1"]
    job = article("Job")
    job["spec"]["tasks"][0]["replicas"] = "two"
    job["spec"]["policies"][0]["event"] = "PodFail"
    assert errors(job) == [
        "spec.policies.0.event: 'PodFail' is not one of ['*', 'PodPending', 'PodRunning', 'PodFailed', "
        "'PodEvicted', 'Unknown', 'TaskCompleted', 'OutOfSync', 'CommandIssued', 'JobUpdated', 'TaskFailed']",
        "spec.tasks.0.replicas: 'two' is not of type 'integer'"]  # fmt: skip
    queue = article("Queue")
    queue["spec"]["capability"]["cpu"] = "64 cores"
    assert errors(queue) and errors(queue)[0].startswith("spec.capability.cpu: '64 cores' does not match")


def test_every_status_tessera_writes_survives_the_servers_pruning() -> None:
    """A real API server keeps only the fields a CRD declares: each status the job controller
    and admission write must come back whole, or it would vanish on a cluster (and be written
    again on every pass)."""
    from contracts.workloads import JobSpec, TaskSpec
    from services.core.workload import jobflow as jf
    from services.kube import volcano
    from services.kube.status import refusal_status
    from tests.kube.pruning import pruned_status

    spec = JobSpec(namespace="default", name="j", tasks=(TaskSpec(name="worker", replicas=2),), min_available=2)
    now = "2026-12-01T00:00:00Z"
    written = {
        ("batch.volcano.sh", "jobs"): [
            volcano.stamp(volcano.job_status(spec, "Running", (), 1, False), None, now),
            volcano.stamp(volcano.job_status(spec, "Inqueue", (), 0, True), None, now),
            volcano.stamp(volcano.job_status(spec, "Aborted", (), 1, False), None, now, "2026-11-30T23:00:00Z"),
            refusal_status({"kind": "Job"}, "spec.queue: no queue", 0.0),
        ],
        ("scheduling.volcano.sh", "podgroups"): [
            volcano.stamp(volcano.podgroup_status("Pending", (), "2/2 tasks in gang unschedulable: x", 2), None, now),
            volcano.stamp(volcano.podgroup_status("Running", (), "", 0), None, now),
            refusal_status({"kind": "PodGroup"}, "spec.minMember: negative", 0.0),
        ],
        ("scheduling.volcano.sh", "queues"): [
            volcano.queue_status("Open", {"cpu": 4000, "memory": 8192, "huawei.com/Ascend910B3": 2000},
                                 ["Running", "Pending", "Inqueue"]),
        ],
        ("flow.volcano.sh", "jobflows"): [
            jf.flow_status({}, [jf.FlowJob("f-a", "Completed", now, 1), jf.FlowJob("f-b", "Running", now)], 2, ""),
            jf.flow_status({}, [jf.FlowJob("f-a", "Aborted")], 1, "Running"),
        ],
    }
    for (group, plural), statuses in written.items():
        for status in statuses:
            assert status
            assert pruned_status(group, plural, status) == status, (plural, status)
    assert refusal_status({"kind": "Queue"}, "spec.weight: 0", 0.0) is None  # no room: the Event


def test_the_pruning_drops_what_a_crd_does_not_declare() -> None:
    from tests.kube.pruning import pruned_status

    kept = pruned_status("batch.volcano.sh", "jobs", {"state": {"phase": "Running"},
                                                      "conditions": [{"type": "Admitted", "status": "False"}]})  # fmt: skip
    assert kept == {"state": {"phase": "Running"}, "conditions": [{"status": "False"}]}


def test_a_hypernode_as_volcano_writes_it_validates_and_a_bad_one_is_refused_by_path() -> None:
    good = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
            "spec": {"tier": 1, "tierName": "superpod", "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
                {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-1"}}},
                {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"superpod": "sp0"}}}},
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}}]}}  # fmt: skip
    assert errors(good) == []
    bad = copy.deepcopy(good)
    bad["spec"]["tier"] = -1
    bad["spec"]["members"][0]["type"] = "Switch"
    bad["spec"]["members"][1]["selector"]["regexMatch"] = {}
    assert errors(bad) == ["spec.members.0.type: 'Switch' is not one of ['Node', 'HyperNode']",
                           "spec.members.1.selector.regexMatch: 'pattern' is a required property",
                           "spec.tier: -1 is less than the minimum of 0"]  # fmt: skip
    del bad["spec"]["tier"]
    assert "spec: 'tier' is a required property" in errors(bad)
