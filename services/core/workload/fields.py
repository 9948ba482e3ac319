"""Known fields of the kinds Tessera reads, for strict field validation.

Kubernetes' strict field validation (kubectl's default since 1.27) refuses an unknown field in
a known kind; we do the same so that a typo such as `resoures` is an error naming its path
instead of a silently ignored request. A schema is a dict of field → sub-schema; `FREE` accepts
anything below (maps of labels, opaque volumes, probes…); a one-element list is "list of".
"""

from __future__ import annotations

import difflib
from typing import Final

FREE: Final = "free"

Schema = dict[str, "Schema | str | list[Schema | str]"]

METADATA: Schema = {k: FREE for k in (
    "name", "namespace", "labels", "annotations", "uid", "generateName", "creationTimestamp",
    "ownerReferences", "finalizers", "resourceVersion", "generation", "managedFields",
    "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")}  # fmt: skip

RESOURCES: Schema = {"limits": FREE, "requests": FREE, "claims": FREE}

CONTAINER: Schema = {k: FREE for k in (
    "name", "image", "command", "args", "workingDir", "ports", "env", "envFrom", "volumeMounts",
    "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext",
    "stdin", "stdinOnce", "tty", "restartPolicy", "resizePolicy")}  # fmt: skip
CONTAINER["resources"] = RESOURCES

MATCH_EXPRESSION: Schema = {"key": FREE, "operator": FREE, "values": FREE}
NODE_SELECTOR_TERM: Schema = {"matchExpressions": [MATCH_EXPRESSION], "matchFields": FREE}
LABEL_SELECTOR: Schema = {"matchLabels": FREE, "matchExpressions": [MATCH_EXPRESSION]}
POD_AFFINITY_TERM: Schema = {
    "labelSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR, "namespaces": FREE,
    "topologyKey": FREE, "matchLabelKeys": FREE, "mismatchLabelKeys": FREE,
}  # fmt: skip
POD_AFFINITY: Schema = {
    "requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM],
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": FREE, "podAffinityTerm": POD_AFFINITY_TERM}
    ],
}
TOPOLOGY_SPREAD_CONSTRAINT: Schema = {
    **{k: FREE for k in ("maxSkew", "topologyKey", "whenUnsatisfiable", "minDomains",
                         "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys")},
    "labelSelector": LABEL_SELECTOR,
}  # fmt: skip
AFFINITY: Schema = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [NODE_SELECTOR_TERM]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": FREE, "preference": NODE_SELECTOR_TERM}
        ],
    },
    "podAffinity": POD_AFFINITY,
    "podAntiAffinity": POD_AFFINITY,
}
TOLERATION: Schema = {k: FREE for k in ("key", "operator", "value", "effect", "tolerationSeconds")}

POD_SPEC: Schema = {k: FREE for k in (
    "volumes", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "dnsPolicy", "nodeSelector", "serviceAccountName", "serviceAccount",
    "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID", "hostIPC",
    "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname", "subdomain",
    "schedulerName", "hostAliases", "priorityClassName", "priority", "dnsConfig",
    "readinessGates", "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
    "resourceClaims", "resources", "ephemeralContainers")}  # fmt: skip
POD_SPEC["containers"] = [CONTAINER]
POD_SPEC["initContainers"] = [CONTAINER]
POD_SPEC["affinity"] = AFFINITY
POD_SPEC["tolerations"] = [TOLERATION]
POD_SPEC["topologySpreadConstraints"] = [TOPOLOGY_SPREAD_CONSTRAINT]

POD: Schema = {"apiVersion": FREE, "kind": FREE, "metadata": METADATA, "spec": POD_SPEC,
               "status": FREE}  # fmt: skip
POD_TEMPLATE: Schema = {"metadata": METADATA, "spec": POD_SPEC}

POLICY: Schema = {k: FREE for k in ("event", "events", "action", "exitCode", "timeout")}
TASK: Schema = {k: FREE for k in (
    "name", "replicas", "minAvailable", "topologyPolicy", "maxRetry", "dependsOn",
    "partitionPolicy")}  # fmt: skip
TASK["template"] = POD_TEMPLATE
TASK["policies"] = [POLICY]

JOB: Schema = {
    "apiVersion": FREE,
    "kind": FREE,
    "metadata": METADATA,
    "spec": {
        **{
            k: FREE
            for k in (
                "schedulerName",
                "minAvailable",
                "volumes",
                "plugins",
                "runningEstimate",
                "queue",
                "maxRetry",
                "ttlSecondsAfterFinished",
                "priorityClassName",
                "minSuccess",
                "networkTopology",
            )
        },
        "tasks": [TASK],
        "policies": [POLICY],
    },
    "status": FREE,
}

PODGROUP: Schema = {
    "apiVersion": FREE,
    "kind": FREE,
    "metadata": METADATA,
    "spec": {
        k: FREE
        for k in (
            "minMember",
            "minTaskMember",
            "queue",
            "priorityClassName",
            "minResources",
            "networkTopology",
            "subGroupPolicy",
        )
    },
    "status": FREE,
}

QUEUE: Schema = {
    "apiVersion": FREE,
    "kind": FREE,
    "metadata": METADATA,
    "spec": {
        k: FREE
        for k in (
            "weight",
            "capability",
            "reclaimable",
            "extendClusters",
            "guarantee",
            "affinity",
            "type",
            "parent",
            "deserved",
            "priority",
            "dequeueStrategy",
        )
    },
    "status": FREE,
}

PRIORITY_CLASS: Schema = {k: FREE for k in (
    "apiVersion", "kind", "metadata", "value", "globalDefault", "description",
    "preemptionPolicy")}  # fmt: skip
PRIORITY_CLASS["metadata"] = METADATA


def unknown_fields(obj: object, schema: Schema | str | list[Schema | str], path: str) -> list[str]:
    """Paths of every field in `obj` that `schema` does not know, in document order."""
    if schema == FREE or obj is None:
        return []
    if isinstance(schema, list):
        if not isinstance(obj, list):
            return []
        out: list[str] = []
        for i, item in enumerate(obj):
            out.extend(unknown_fields(item, schema[0], f"{path}[{i}]"))
        return out
    if not isinstance(schema, dict) or not isinstance(obj, dict):
        return []
    out = []
    for key, value in obj.items():
        sub = f"{path}.{key}" if path else str(key)
        if key not in schema:
            out.append(sub)
        else:
            out.extend(unknown_fields(value, schema[key], sub))
    return out


#: unknown fields users paste from somewhere in particular, and what to do about each
KNOWN_STRAYS = {
    ("Queue", "spec.policy"): "Volcano's Queue has no spec.policy (the `policy: besteffort` of a "
                              "widely copied article; an API server prunes it, or with kubectl's "
                              "strict validation refuses it): remove the line",
}


def unknown_field_rule(kind: str, schema: Schema | str | list[Schema | str], path: str) -> str:
    """The rule an unknown field breaks, with what to write instead where it can be told: a
    known stray, or the field of that object it most looks like (`resoures` → `resources`)."""
    if stray := KNOWN_STRAYS.get((kind, path)):
        return f"unknown field: {stray}"
    parent, _, key = path.rpartition(".")
    key = key.split("[", 1)[0]
    level = _schema_at(schema, parent)
    if isinstance(level, dict) and (near := difflib.get_close_matches(key, list(level), n=1, cutoff=0.75)):
        return f"unknown field; did you mean {near[0]}?"
    return "unknown field"


def _schema_at(schema: Schema | str | list[Schema | str], path: str) -> Schema | str | list[Schema | str]:
    """The sub-schema at a path `unknown_fields` gave (`spec.containers[0].resources`)."""
    for part in path.split(".") if path else ():
        name = part.split("[", 1)[0]
        if not isinstance(schema, dict) or name not in schema:
            return FREE
        schema = schema[name]
        if "[" in part and isinstance(schema, list):
            schema = schema[0]
    return schema
